"""Sokoban: does attempt 2 die by the same push as attempt 1?

usage: python3 same-push.py REPORTS_DIR [ROW ...]

REPORTS_DIR is an eval:base --reports folder. For each Sokoban report of the rows (default: lamer,
i.e. row (a), with the reflections in memory, and independent, row (c)), every attempt is replayed
from its task seed with the game's own code (dead-pushes.mts, run with `npx tsx` from the
repository root: the reports hold the actions, not the boards) and the push that ended a dead
attempt is found (the env ends an attempt at the push that leaves the puzzle unsolvable). Prints,
per row, of the attempt-2 endings in a dead state: how many die by the same push as attempt 1
(the same box cell and direction), of those whose attempt 1 died too, and how many end in the same
box configuration (the issue's measure); then the same for every later attempt (2 and 3) against
any earlier attempt of its session. Standard library only (the replay needs node and the repo).
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, '..', '..', '..'))


def replay(report: str) -> list:
    out = subprocess.run(['npx', 'tsx', os.path.join(HERE, 'dead-pushes.mts'), os.path.abspath(report)],
                         cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def key(p: dict | None):
    return None if p is None else (p['row'], p['col'], p['move'])


def pct(a: int, b: int) -> str:
    return f"{a}/{b} ({100 * a / b:.1f}%)" if b else f"{a}/0"


def summarise(lines: list) -> dict:
    sessions: dict = {}
    for x in lines:
        sessions.setdefault((x['taskId'], x['trial']), []).append(x)
    r = dict(attempts=len(lines), mismatches=sum(not x['okReplay'] for x in lines), a2_dead=0, a2_dead_a1_dead=0,
             a2_same_push=0, a2_same_boxes=0, later_dead=0, later_same_push=0, later_same_boxes=0)
    for atts in sessions.values():
        atts.sort(key=lambda x: x['attempt'])
        for i, x in enumerate(atts):
            if i == 0 or not x['dead']:
                continue
            earlier = [y for y in atts[:i] if y['dead']]
            same_push = any(key(y['push']) == key(x['push']) for y in earlier)
            same_boxes = any(y['boxes'] == x['boxes'] for y in earlier)
            r['later_dead'] += 1
            r['later_same_push'] += same_push
            r['later_same_boxes'] += same_boxes
            if x['attempt'] == 1:
                r['a2_dead'] += 1
                r['a2_dead_a1_dead'] += bool(earlier)
                r['a2_same_push'] += same_push
                r['a2_same_boxes'] += same_boxes
    return r


def main(reports: str, rows: list) -> None:
    names = sorted(f for f in os.listdir(reports) if f.startswith('sokoban-') and f.endswith('.json'))
    for row in rows:
        for f in [n for n in names if n[:-5].split('-', 3)[-1] == row]:
            r = summarise(replay(os.path.join(reports, f)))
            print(f"{f[:-5]}: {r['attempts']} attempts replayed, {r['mismatches']} mismatches")
            print(f"  attempt 2 ending dead: {r['a2_dead']} (attempt 1 dead too: {r['a2_dead_a1_dead']}); "
                  f"same push as attempt 1: {pct(r['a2_same_push'], r['a2_dead'])}, "
                  f"of those after a dead attempt 1: {pct(r['a2_same_push'], r['a2_dead_a1_dead'])}; "
                  f"same box configuration: {pct(r['a2_same_boxes'], r['a2_dead'])}")
            print(f"  attempts 2-3 ending dead: {r['later_dead']}; same push as an earlier attempt: "
                  f"{pct(r['later_same_push'], r['later_dead'])}; same box configuration: {pct(r['later_same_boxes'], r['later_dead'])}")


if __name__ == '__main__':
    if len(sys.argv) < 2 or not os.path.isdir(sys.argv[1]):
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:] or ['lamer', 'independent'])
