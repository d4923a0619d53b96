"""Rows of an eval:base run and MineSweeper re-clicks of remembered mines.

usage: python3 reclicks.py EVAL_JSON REPORTS_DIR

EVAL_JSON is eval:base's --out file, REPORTS_DIR its --reports folder. Prints each game's rows
(pass@1/2/3 and invalid actions, in percent), the paired (a) - (c) interval that eval:base
computed, and for the MineSweeper LaMer rows: of the later attempts (2 and 3) that end on a mine,
the share that end on a cell an earlier attempt's reflection named as a mine, and the same for
attempt 2 alone. Standard library only.
"""
import json
import os
import sys


def main(out: str, reports: str) -> None:
    d = json.load(open(out))
    for g in d['games']:
        for r in g['rows']:
            p = r['passAtK']
            print(f"{g['env']:18s} {r['row']:12s} {100 * p['1']:5.1f} {100 * p['2']:5.1f} {100 * p['3']:5.1f} invalid {100 * r['invalidActionRate']:4.1f}")
        if 'lamerMinusIndependent' in g:
            i = g['lamerMinusIndependent']
            print(f"  pass@3 (a) - (c): {100 * i['mean']:+.1f} [{100 * i['lo']:+.1f}, {100 * i['hi']:+.1f}] over {i['tasks']} tasks")
    for row in ('lamer', 'lamer-avail'):
        f = os.path.join(reports, f'minesweeper-6x6-3-{row}.json')
        if not os.path.exists(f):
            continue
        later = same = a2 = a2same = 0
        for s in json.load(open(f))['sessions']:
            named = set()
            for a in s['attempts']:
                if a['attempt'] > 0 and not a['success'] and a['endReason'] == 'done' and a['trajectory']:
                    hit = a['trajectory'][-1].strip() in named
                    later += 1
                    same += hit
                    if a['attempt'] == 1:
                        a2 += 1
                        a2same += hit
                refl = a.get('reflection') or ''
                if 'was a mine' in refl:
                    named.add(refl.split(' was a mine')[0].strip())
        print(f"minesweeper {row}: later attempts ending on a mine {later}, on a remembered mine {same} ({100 * same / max(1, later):.1f}%); attempt 2: {a2same}/{a2} ({100 * a2same / max(1, a2):.1f}%)")


if __name__ == '__main__':
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
