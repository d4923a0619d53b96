#!/usr/bin/env python3
"""Play MineSweeper against lamer-server through the typed Python client.

The environment is the server's builtin MineSweeper (src/envs/minesweeper.ts), ported line for
line so that the builtin model sees the boards and texts it was trained on: the same instructions,
the same observation layout, the same boards for the same seed (task id
"minesweeper-6x6-3:seed=N", as `lamer eval` names it) and the same rewards.

- Board: 6x6 with 3 mines by default. reset(seed) draws a first click, places the mines among the
  other cells and applies that click (boards it already wins are redrawn from the same stream).
- Observation: a header line of column numbers, then one line per row: its number, a space and
  one character per cell, rows and columns numbered from 1:

        123456
      1 ??1.??
      2 ??1.??
      ...

  '?' hidden, '.' no mine around, '1'-'8' mines around, '*' the mine that was clicked.
- Action: "(row, col)", 1-based; the last "(r, c)" in the text counts.
- Rewards: invalid or useless click -1 (the game goes on; the next step says invalidAction), one
  cell +0.5, a cascade (an empty cell opening its neighbours) +2, win +10 (done), mine -0.1 (done).

One session is one task (one seed: the same board every attempt), up to --attempts attempts of
up to --max-steps actions each. The server is the agent: we post observations and rewards and
execute the actions it answers; between failed attempts it writes a reflection. Sessions are
`mode: eval` by default (never trained on); --mode train records them as training data. The
default seed is a held-out one (the builtin env's eval seeds start at 1,000,000,000).

    python3 play_minesweeper.py --url http://127.0.0.1:8080 --api-key KEY

Exit status: 0 when the session ended (completed), 1 on an error answer.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import urllib.error
from dataclasses import dataclass
from typing import List, Literal, Optional, Sequence, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from lamer_client import LamerClient, LamerProblem  # noqa: E402
from lamer_client.client import Session, StepRequest  # noqa: E402

# The first seed of the builtin envs' held-out (eval) range.
EVAL_SEED_START = 1_000_000_000

CELL_RE = re.compile(r"\(\s*(-?\d+)\s*,\s*(-?\d+)\s*\)")

_M32 = 0xFFFFFFFF


def _imul(a: int, b: int) -> int:
    """32-bit multiplication modulo 2^32, as JavaScript's Math.imul (unsigned result)."""
    return (a * b) & _M32


class Rng:
    """The builtin envs' random numbers (src/envs/rng.ts): SplitMix32 mixes the seed, Mulberry32 runs.

    All state is kept as unsigned 32-bit integers; the results equal the TypeScript ones bit for bit.
    """

    def __init__(self, seed: int) -> None:
        z = ((seed & _M32) ^ (seed // 4294967296)) & _M32
        z = (z + 0x9E3779B9) & _M32
        z = _imul(z ^ (z >> 16), 0x85EBCA6B)
        z = _imul(z ^ (z >> 13), 0xC2B2AE35)
        self.state = (z ^ (z >> 16)) & _M32

    def next_uint32(self) -> int:
        """The next unsigned 32-bit number (Mulberry32)."""
        self.state = (self.state + 0x6D2B79F5) & _M32
        t = self.state
        t = _imul(t ^ (t >> 15), t | 1)
        t ^= (t + _imul(t ^ (t >> 7), t | 61)) & _M32
        return (t ^ (t >> 14)) & _M32

    def int(self, n: int) -> int:
        """A uniform integer in [0, n); n must be positive."""
        return math.floor(self.next_uint32() / 4294967296 * n)

    def shuffle(self, xs: List[int]) -> None:
        """Fisher-Yates shuffle in place."""
        for i in range(len(xs) - 1, 0, -1):
            j = self.int(i + 1)
            xs[i], xs[j] = xs[j], xs[i]


def grid_text(rows: Sequence[str]) -> str:
    """A grid as the builtin envs' observation text (src/envs/grid.ts gridText, numbered from 1).

    A header line of column numbers (a tens line above it when there are 10 or more columns), then
    per row its number (right-aligned), one space and its cells, one character each.
    """
    cols = len(rows[0]) if rows else 0
    width = len(str(len(rows)))
    pad = " " * (width + 1)
    nums = range(1, cols + 1)
    header = []
    if any(n >= 10 for n in nums):
        header.append(pad + "".join(str(n // 10 % 10) if n >= 10 else " " for n in nums))
    header.append(pad + "".join(str(n % 10) for n in nums))
    return "\n".join(header + [f"{str(i + 1).rjust(width)} {r}" for i, r in enumerate(rows)])


@dataclass(frozen=True)
class StepResult:
    observation: str
    reward: float
    done: bool
    success: bool
    invalid_action: bool


class MineSweeper:
    """The builtin MineSweeper (src/envs/minesweeper.ts); rows and columns 1-based in actions and observations."""

    def __init__(self, rows: int = 6, cols: int = 6, mines: int = 3) -> None:
        self.rows = rows
        self.cols = cols
        self.n_mines = mines
        self.name = f"minesweeper-{rows}x{cols}-{mines}"
        self.instructions = (
            f"MineSweeper {rows}x{cols}, {mines} mines. Rows left, columns on top, from 1. "
            "? hidden, . no mine around, 1-8 mines around, * mine. "
            "Reveal all safe cells; a mine loses. Answer one hidden cell as (row, col), e.g. (2, 3)"
        )
        self.mine: List[bool] = []
        self.revealed: List[bool] = []
        self.count: List[int] = []
        self.hit = -1
        self.over = True

    def task_id(self, seed: int) -> str:
        """The task id of a seed, as the server's builtin envs and `lamer eval` write it."""
        return f"{self.name}:seed={seed}"

    def reset(self, seed: int) -> str:
        """Draws the board of `seed` (the same seed, the same board and first click); returns the observation.

        Raises RuntimeError when no board can be drawn (too many mines for the board).
        """
        n = self.rows * self.cols
        rng = Rng(seed)
        for _ in range(10_000):
            first = rng.int(n)
            others = [i for i in range(n) if i != first]
            rng.shuffle(others)
            mines = set(others[: self.n_mines])
            self._load([i in mines for i in range(n)])
            self._reveal(first)
            if not self._won():
                return self.observation()
        raise RuntimeError(f"minesweeper: could not draw a board for seed {seed}")

    def set_board(self, layout: Sequence[str], opened: Sequence[Tuple[int, int]] = ()) -> str:
        """Sets a hand-made board: one string per row, '*' a mine; `opened` are 1-based cells revealed first."""
        self._load([ch == "*" for line in layout for ch in line])
        for r, c in opened:
            self._reveal((r - 1) * self.cols + (c - 1))
        return self.observation()

    def _neighbours(self, i: int) -> List[int]:
        r, c = divmod(i, self.cols)
        return [(r + dr) * self.cols + (c + dc) for dr in (-1, 0, 1) for dc in (-1, 0, 1)
                if (dr or dc) and 0 <= r + dr < self.rows and 0 <= c + dc < self.cols]

    def _load(self, mine: List[bool]) -> None:
        self.mine = mine
        self.revealed = [False] * len(mine)
        self.count = [sum(mine[j] for j in self._neighbours(i)) for i in range(len(mine))]
        self.hit = -1
        self.over = False

    def _reveal(self, i: int) -> int:
        """Reveals safe cell i, flooding through empty cells; returns how many cells were revealed."""
        opened = 0
        stack = [i]
        while stack:
            j = stack.pop()
            if self.revealed[j] or self.mine[j]:
                continue
            self.revealed[j] = True
            opened += 1
            if self.count[j] == 0:
                stack.extend(k for k in self._neighbours(j) if not self.revealed[k])
        return opened

    def _won(self) -> bool:
        return all(m or r for m, r in zip(self.mine, self.revealed))

    def observation(self) -> str:
        """The observation text of the current state (see the module docstring)."""
        lines = []
        for r in range(self.rows):
            line = ""
            for c in range(self.cols):
                i = r * self.cols + c
                if i == self.hit:
                    line += "*"
                elif not self.revealed[i]:
                    line += "?"
                else:
                    line += str(self.count[i]) if self.count[i] else "."
            lines.append(line)
        return grid_text(lines)

    def available_actions(self) -> List[str]:
        """The hidden cells as "(row, col)", row-major; none once the attempt is over."""
        if self.over:
            return []
        return [f"({i // self.cols + 1}, {i % self.cols + 1})" for i, r in enumerate(self.revealed) if not r]

    def step(self, action: str) -> StepResult:
        """Applies "(row, col)"; returns the observation after it and its reward."""
        matches = CELL_RE.findall(action or "")  # the last "(r, c)" in the text counts
        cell = (int(matches[-1][0]), int(matches[-1][1])) if matches else None
        if cell is None or not (1 <= cell[0] <= self.rows and 1 <= cell[1] <= self.cols):
            return StepResult(self.observation(), -1.0, False, False, True)
        i = (cell[0] - 1) * self.cols + (cell[1] - 1)
        if self.revealed[i]:
            return StepResult(self.observation(), -1.0, False, False, True)  # useless click: the game goes on
        if self.mine[i]:
            self.hit = i
            self.over = True
            return StepResult(self.observation(), -0.1, True, False, False)
        opened = self._reveal(i)
        if self._won():
            self.over = True
            return StepResult(self.observation(), 10.0, True, True, False)
        return StepResult(self.observation(), 2.0 if opened > 1 else 0.5, False, False, False)


def play(client: LamerClient, seed: int, attempts: int, max_steps: int, mode: Literal["train", "eval"],
         verbose: bool) -> Session:
    """Plays one session (up to `attempts` attempts at the board of `seed`); returns the session."""
    env = MineSweeper()
    session = client.create_session({
        "taskId": env.task_id(seed), "instructions": env.instructions, "env": "minesweeper",
        "maxAttempts": attempts, "maxSteps": max_steps, "memory": "reflection_only", "mode": mode,
    })
    sid = session["id"]
    for attempt in range(attempts):
        observation = env.reset(seed)  # the same initial state every attempt
        body: StepRequest = {"attempt": attempt, "step": 0, "observation": observation,
                             "availableActions": env.available_actions()}
        step = 0
        while True:
            answer = client.post_step(sid, body)
            action = answer["action"]
            if action is None:  # the attempt ended (done, or step == maxSteps)
                break
            result = env.step(action)
            step += 1
            if verbose:
                print(f"attempt {attempt} step {step - 1}: {action} -> reward {result.reward}", file=sys.stderr)
            body = {"attempt": attempt, "step": step, "observation": result.observation,
                    "reward": result.reward, "done": result.done, "success": result.success,
                    "invalidAction": result.invalid_action}
            if not result.done:
                body["availableActions"] = env.available_actions()
        res = answer["attemptResult"]
        if verbose and res is not None:
            print(f"attempt {attempt}: success={res['success']} return={res['return']} "
                  f"steps={res['steps']} endReason={res['endReason']}", file=sys.stderr)
        reflection = answer["reflection"]
        if verbose and reflection is not None:
            print(f"reflection: {reflection['text'][:200]!r}", file=sys.stderr)
        if answer["session"]["status"] != "active":
            break
    return client.get_session(sid)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default=os.environ.get("LAMER_URL", "http://127.0.0.1:8080"))
    p.add_argument("--api-key", default=os.environ.get("LAMER_API_KEY"))
    p.add_argument("--seed", type=int, default=EVAL_SEED_START + 42, help="board seed (default: a held-out one)")
    p.add_argument("--attempts", type=int, default=3)
    p.add_argument("--max-steps", type=int, default=7)
    p.add_argument("--mode", choices=["eval", "train"], default="eval",
                   help="eval (default): never trained on; train: recorded as training data")
    p.add_argument("--json", action="store_true", help="print the final session as JSON on stdout")
    p.add_argument("--quiet", action="store_true")
    args = p.parse_args(argv)
    client = LamerClient(args.url, api_key=args.api_key, retries=3)
    try:
        session = play(client, args.seed, args.attempts, args.max_steps, args.mode, not args.quiet)
    except LamerProblem as err:
        print(f"error: {err} ({err.type})", file=sys.stderr)
        return 1
    except (urllib.error.URLError, OSError) as err:
        reason = err.reason if isinstance(err, urllib.error.URLError) else err
        print(f"error: cannot reach the server at {args.url}: {reason}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(session))
    else:
        print(f"session {session['id']}: status {session['status']}, "
              f"attempts {len(session['attempts'])}, pass@k {session['passAtK']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
