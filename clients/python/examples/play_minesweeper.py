#!/usr/bin/env python3
"""Play MineSweeper against lamer-server through the typed Python client.

The environment is a small self-contained MineSweeper as the LaMer paper uses it
(docs/method.md#environments): a 6x6 board with 3 mines, a random safe first click applied at
reset, rows and columns numbered 1..6, cells '?' hidden, '.' empty, '1'-'8' counts, '*' mine;
reveal only. Rewards as given by the environment: invalid or useless click -1 (the game goes
on; the next step says invalidAction), one cell +0.5,
a cascade (an empty cell opening its neighbours) +2, win +10 (done), mine -0.1 (done).
The action is "(row, col)"; the observation is one line per row: "Row 1: ? ? . 1 ? ?".

One session is one task (one seed: the same board every attempt), up to --attempts attempts of
up to --max-steps actions each. The server is the agent: we post observations and rewards and
execute the actions it answers; between failed attempts it writes a reflection.

    python3 play_minesweeper.py --url http://127.0.0.1:8080 --api-key KEY --seed 42

Exit status: 0 when the session ended (completed), 1 on an error answer.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import urllib.error
from dataclasses import dataclass
from typing import List, Literal, Optional, Set, Tuple

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from lamer_client import LamerClient, LamerProblem  # noqa: E402
from lamer_client.client import Session, StepRequest  # noqa: E402

INSTRUCTIONS = (
    "You are playing MineSweeper on a 6x6 board with 3 hidden mines. Rows and columns are "
    "numbered 1 to 6. '?' is a hidden cell, '.' an empty revealed cell, a digit the number of "
    "mines next to a revealed cell, '*' a mine. Reveal a cell by answering its coordinates as "
    "(row, col), for example (3, 4). Revealing a mine loses the game; revealing every cell "
    "without a mine wins it."
)

ACTION_RE = re.compile(r"\(\s*(\d+)\s*,\s*(\d+)\s*\)")


@dataclass(frozen=True)
class StepResult:
    observation: str
    reward: float
    done: bool
    success: bool
    invalid_action: bool


class MineSweeper:
    """MineSweeper, 6x6 with 3 mines by default; rows/cols 1-based in actions and observations."""

    def __init__(self, size: int = 6, mines: int = 3) -> None:
        self.size = size
        self.n_mines = mines
        self.mines: Set[Tuple[int, int]] = set()
        self.revealed: Set[Tuple[int, int]] = set()
        self.exploded: Optional[Tuple[int, int]] = None
        self.done = False

    def reset(self, seed: int) -> str:
        """The same seed gives the same mines and the same first click (the task instance)."""
        rng = random.Random(seed)
        cells = [(r, c) for r in range(self.size) for c in range(self.size)]
        while True:
            self.mines = set(rng.sample(cells, self.n_mines))
            self.revealed = set()
            self.exploded = None
            self.done = False
            first = rng.choice([cell for cell in cells if cell not in self.mines])
            self._reveal(first)
            if not self._won():
                return self.observation()

    def _count(self, r: int, c: int) -> int:
        return sum((r + dr, c + dc) in self.mines for dr in (-1, 0, 1) for dc in (-1, 0, 1) if dr or dc)

    def _reveal(self, cell: Tuple[int, int]) -> int:
        """Reveals cell (cascading through empty cells); returns how many cells were revealed."""
        stack = [cell]
        opened = 0
        while stack:
            r, c = stack.pop()
            if (r, c) in self.revealed or (r, c) in self.mines:
                continue
            self.revealed.add((r, c))
            opened += 1
            if self._count(r, c) == 0:
                for dr in (-1, 0, 1):
                    for dc in (-1, 0, 1):
                        nr, nc = r + dr, c + dc
                        if 0 <= nr < self.size and 0 <= nc < self.size and (nr, nc) not in self.revealed:
                            stack.append((nr, nc))
        return opened

    def _won(self) -> bool:
        return len(self.revealed) == self.size * self.size - len(self.mines)

    def observation(self) -> str:
        rows = []
        for r in range(self.size):
            cells = []
            for c in range(self.size):
                if (r, c) == self.exploded:
                    cells.append("*")
                elif (r, c) in self.revealed:
                    n = self._count(r, c)
                    cells.append(str(n) if n else ".")
                else:
                    cells.append("?")
            rows.append(f"Row {r + 1}: " + " ".join(cells))
        return "\n".join(rows)

    def available_actions(self) -> List[str]:
        return [f"({r + 1}, {c + 1})" for r in range(self.size) for c in range(self.size)
                if (r, c) not in self.revealed]

    def step(self, action: str) -> StepResult:
        """Applies "(row, col)"; returns the observation after it and its reward."""
        matches = ACTION_RE.findall(action or "")  # the last "(r, c)" in the text counts
        m = matches[-1] if matches else None
        reward: float
        invalid = False
        success = False
        if not m or not (1 <= int(m[0]) <= self.size and 1 <= int(m[1]) <= self.size):
            reward, invalid = -1.0, True
        else:
            cell = (int(m[0]) - 1, int(m[1]) - 1)
            if cell in self.revealed:
                reward, invalid = -1.0, True  # useless click: the game goes on
            elif cell in self.mines:
                self.exploded = cell
                reward, self.done = -0.1, True
            else:
                opened = self._reveal(cell)
                reward = 2.0 if opened > 1 else 0.5
                if self._won():
                    reward, self.done, success = 10.0, True, True
        return StepResult(self.observation(), reward, self.done, success, invalid)


def play(client: LamerClient, seed: int, attempts: int, max_steps: int, mode: Literal["train", "eval"],
         verbose: bool) -> Session:
    """Plays one session (up to `attempts` attempts at the board of `seed`); returns the session."""
    session = client.create_session({
        "taskId": f"minesweeper-6x6-3:seed={seed}", "instructions": INSTRUCTIONS, "env": "minesweeper",
        "maxAttempts": attempts, "maxSteps": max_steps, "memory": "reflection_only", "mode": mode,
    })
    sid = session["id"]
    env = MineSweeper()
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
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--attempts", type=int, default=3)
    p.add_argument("--max-steps", type=int, default=7)
    p.add_argument("--mode", choices=["train", "eval"], default="train")
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
