"""Paired bootstrap over tasks (10,000 resamples, seed 0) of pass@1 and pass@3 differences between two
eval:base report folders (--reports): python3 paired.py NEW_REPORTS OLD_REPORTS.
Kept as the record of how run D's figures were made; use `npm run experiment:base-paired -- --new DIR --old DIR` (experiments/base-paired.ts) instead."""
import json, random, sys
def solved(path):
    d = json.load(open(path)); out = {}
    for s in d['sessions']:
        k = None
        for i, a in enumerate(s['attempts']):
            if a['success']: k = i; break
        out[s['taskId']] = k
    return out
def passk(m, k): return {t: (v is not None and v < k) for t, v in m.items()}
random.seed(0)
for game in ['minesweeper-6x6-3', 'sokoban-6x6-2']:
    for row in ['lamer', 'lamer-avail', 'independent']:
        a = solved(f'{sys.argv[1]}/{game}-{row}.json'); b = solved(f'{sys.argv[2]}/{game}-{row}.json')
        tasks = sorted(a)
        for k in (1, 3):
            pa, pb = passk(a, k), passk(b, k)
            diffs = [pa[t] - pb[t] for t in tasks]
            n = len(diffs); mean = sum(diffs) / n
            bs = sorted(sum(diffs[random.randrange(n)] for _ in range(n)) / n for _ in range(10000))
            print(f'{game} {row} pass@{k}: new - old = {100*mean:+.1f} [{100*bs[249]:+.1f}, {100*bs[9749]:+.1f}]')
