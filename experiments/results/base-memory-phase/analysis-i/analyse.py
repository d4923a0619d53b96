"""Why avoiding the remembered mine does not turn into wins (mem-i-3000, MineSweeper 6x6/3).

usage: python3 analyse.py [DIR]   (DIR holds steps-{lamer,independent,lamer-avail}.jsonl from dump-steps.mts)
Standard library only. Prints markdown tables to stdout.
"""
import json
import os
import sys
from collections import Counter, defaultdict

D = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
ROWS = ('lamer', 'independent', 'lamer-avail')


def load(row):
    S = defaultdict(dict)
    for line in open(os.path.join(D, f'steps-{row}.jsonl')):
        x = json.loads(line)
        S[x['taskId']][x['attempt']] = x
    return S


def ending(a):
    if a['success']:
        return 'win'
    if a['endReason'] == 'max_steps':
        return 'turn cap'
    return 'mine'


def cell(i):
    return f'({i // 6 + 1}, {i % 6 + 1})'


def pct(a, b):
    return f'{a}/{b} ({100 * a / b:.1f}%)' if b else f'{a}/0'


def table(head, rows):
    print('| ' + ' | '.join(head) + ' |')
    print('|' + '---|' * len(head))
    for r in rows:
        print('| ' + ' | '.join(str(v) for v in r) + ' |')
    print()


def mean(xs):
    xs = [x for x in xs if x is not None]
    return f'{sum(xs) / len(xs):.2f}' if xs else '-'


data = {r: load(r) for r in ROWS}
tasks = sorted(data['lamer'])

# ---------------------------------------------------------------- endings per attempt
print('## Endings per attempt (counts)\n')
rows = []
for r in ROWS:
    for k in range(3):
        c = Counter(ending(s[k]) for s in data[r].values() if k in s)
        n = sum(c.values())
        inv = sum(st['invalid'] for s in data[r].values() if k in s for st in s[k]['steps'])
        stp = sum(len(s[k]['steps']) for s in data[r].values() if k in s)
        rc = sum(st['invalid'] and st['revealedClick'] for s in data[r].values() if k in s for st in s[k]['steps'])
        rows.append([r, k + 1, n, c['win'], c['mine'], c['turn cap'], pct(inv, stp), rc])
table(['row', 'attempt', 'played', 'win', 'mine', 'turn cap', 'invalid clicks / clicks', 'of which on a revealed cell'], rows)

# ---------------------------------------------------------------- Q1 replay of attempt 1
print('## Q1. Attempt 2 after an attempt-1 mine death: replay of attempt 1\n')
rows = []
details = {}
for r in ROWS:
    n = first_same = prefix_same = reach = 0
    at_state = Counter()
    recs = []
    for t in tasks:
        s = data[r][t]
        if 1 not in s or ending(s[0]) != 'mine':
            continue
        a1, a2 = s[0], s[1]
        N = a1['steps'][-1]['idx']
        death_obs = a1['steps'][-1]['obs']
        pre = [st['act'].strip() for st in a1['steps'][:-1] if not st['invalid']]  # attempt 1's valid clicks before death
        v2 = [st['act'].strip() for st in a2['steps'] if not st['invalid']]
        n += 1
        first_same += bool(v2) and bool(a1['steps']) and v2[0] == a1['steps'][0]['act'].strip()
        k = 0
        while k < min(len(pre), len(v2)) and pre[k] == v2[k]:
            k += 1
        prefix_same += k == len(pre)
        hit = next((st for st in a2['steps'] if st['obs'] == death_obs), None)
        # first valid click made at the death state (invalid ones leave the board unchanged)
        hitv = next((st for st in a2['steps'] if st['obs'] == death_obs and not st['invalid']), None)
        if hit:
            reach += 1
            inv_there = sum(st['invalid'] for st in a2['steps'] if st['obs'] == death_obs)
            if hitv is None:
                at_state['only invalid clicks there (turn cap)'] += 1
            elif hitv['idx'] == N:
                at_state['re-click named mine'] += 1
            elif hitv['mine']:
                at_state['other mine'] += 1
            else:
                at_state['safe cell'] += 1
            recs.append(dict(task=t, N=N, hitv=hitv, inv_there=inv_there, a2=a2, a1=a1))
        else:
            recs.append(dict(task=t, N=N, hitv=None, a2=a2, a1=a1, reached=False))
    details[r] = recs
    rows.append([r, n, pct(first_same, n), pct(prefix_same, n), pct(reach, n), at_state['re-click named mine'], at_state['other mine'],
                 at_state['safe cell'], at_state['only invalid clicks there (turn cap)']])
table(['row', 'attempt-1 mine deaths', 'a2 first click = a1 first click', 'a2 replays all a1 clicks before the death',
       'a2 reaches the death state', 'there: re-clicks N', 'there: other mine', 'there: safe cell', 'there: only invalid'], rows)

# ---------------------------------------------------------------- Q2 what is clicked instead of N
print('## Q2. At the death state in attempt 2: the first valid click there (N = the mine attempt 1 hit)\n')
rows = []
for r in ROWS:
    for lab, sel in (('not N', lambda h, N: h['idx'] != N), ('N', lambda h, N: h['idx'] == N)):
        hs = [x for x in details[r] if x.get('hitv') and sel(x['hitv'], x['N'])]
        if not hs:
            continue
        H = [x['hitv'] for x in hs]
        rows.append([r, lab, len(H), sum(h['mine'] for h in H), mean([h['p0'] for h in H]), mean([h['p1'] for h in H]),
                     sum((h['p1'] or 0) > 0.5 for h in H), sum(h['p1'] == 0 for h in H), sum(h['safe1'] > 0 for h in H),
                     sum(h['safe0'] > 0 for h in H), sum(h['adjNamed'] for h in H)])
table(['row', 'click', 'n', 'was a mine', 'mean P(mine) board', 'mean P(mine) board+N mine', 'P>0.5 (board+N)',
       'provably safe click (board+N)', 'a safe cell existed (board+N)', 'a safe cell existed (board)', 'adjacent to N'], rows)

# Same, on all attempt-2 decisions (valid clicks) with N still hidden, for all mine-death tasks.
print('### All valid attempt-2 clicks while N is hidden (attempt-1 mine deaths)\n')
rows = []
for r in ROWS:
    C = [st for x in details[r] for st in x['a2']['steps'] if not st['invalid'] and x['N'] in st['namedHidden'] or
         (not st['invalid'] and r == 'independent' and st['namedHidden'])]
    C = [st for st in C if not st['invalid']]
    rows.append([r, len(C), sum(st['clickIsNamed'] for st in C), sum(st['mine'] for st in C),
                 sum(st['mine'] and not st['clickIsNamed'] for st in C), mean([st['p1'] for st in C if not st['clickIsNamed']]),
                 sum(st['p1'] == 0 for st in C if not st['clickIsNamed']), sum(st['safe1'] > 0 for st in C if not st['clickIsNamed'] and st['p1'] != 0)])
table(['row', 'valid clicks', 'on N', 'on a mine', 'on another mine', 'mean P(mine | board+N) of non-N clicks',
       'non-N clicks provably safe', 'non-N unsafe clicks while a safe cell existed'], rows)

# ---------------------------------------------------------------- Q3 where attempt-2 mine endings happen
print('## Q3. Attempt-2 and attempt-3 mine endings (all tasks that played them)\n')
rows = []
for r in ROWS:
    for k in (1, 2):
        E = [s[k] for s in data[r].values() if k in s and ending(s[k]) == 'mine']
        L = [a['steps'][-1] for a in E]
        hasN = [a for a in E if a['named']]
        Ln = [a['steps'][-1] for a in hasN]
        st = Counter(len([x for x in a['steps'] if not x['invalid']]) for a in E)
        rows.append([r, k + 1, len(E), len(hasN), sum(x['clickIsNamed'] for x in Ln), sum(x['adjNamed'] for x in Ln),
                     sum((x['p0'] or 0) > 0.5 for x in L), sum((x['p1'] or 0) > 0.5 for x in Ln),
                     sum(x['safe1'] > 0 for x in Ln), mean([x['p1'] for x in Ln if not x['clickIsNamed']]),
                     ' '.join(f'{i}:{st[i]}' for i in sorted(st)), mean([x['t'] + 1 for x in L])])
table(['row', 'attempt', 'mine endings', 'with a named mine', 'on named mine', 'adjacent to a named mine', 'P(mine|board)>0.5',
       'P(mine|board+named)>0.5', 'a safe cell existed (board+named)', 'mean P(mine|board+named) non-named',
       'valid click # that died (k:count)', 'mean step # (with invalid)'], rows)

# ---------------------------------------------------------------- Q3b invalid clicks
print('## Q3b. Invalid clicks by attempt and by the memory line before it\n')
rows = []
for r in ROWS:
    for k in (0, 1, 2):
        for mem in ('none', 'mine line', 'turns line'):
            A = []
            for s in data[r].values():
                if k not in s:
                    continue
                prev = s[k - 1] if k > 0 else None
                if r == 'independent':
                    m = 'none' if k == 0 else ('mine line' if ending(prev) == 'mine' else 'turns line')
                else:
                    m = 'none' if k == 0 else ('mine line' if 'was a mine' in (prev['reflection'] or '') else 'turns line')
                if m == mem:
                    A.append(s[k])
            if not A:
                continue
            steps = [st for a in A for st in a['steps']]
            inv = [st for st in steps if st['invalid']]
            prevcells = []
            for a in A:
                rev_prev = set()
                for st in a['steps']:
                    if st['invalid'] and st['revealedClick'] and st['act'].strip() in a['prevTrajectory']:
                        prevcells.append(st)
            cap = sum(ending(a) == 'turn cap' for a in A)
            cap_inv = sum(ending(a) == 'turn cap' and any(st['invalid'] for st in a['steps']) for a in A)
            first = Counter()
            for a in A:
                for st in a['steps']:
                    if st['invalid']:
                        first[st['t']] += 1
            rows.append([r, k + 1, mem if r != 'independent' or k == 0 else mem + ' (would be)', len(A), len(steps), pct(len(inv), len(steps)),
                         sum(st['revealedClick'] for st in inv), len(prevcells), cap, cap_inv,
                         sum(any(st['invalid'] for st in a['steps']) for a in A)])
table(['row', 'attempt', 'previous reflection', 'attempts', 'clicks', 'invalid', 'invalid on revealed cell',
       'invalid = cell clicked in previous attempt', 'turn-cap endings', 'turn-cap endings with >=1 invalid', 'attempts with >=1 invalid'], rows)

# ---------------------------------------------------------------- Q4 attempt-1 deaths
print('## Q4. Attempt-1 mine deaths: was the death click avoidable from the board?\n')
rows = []
A1 = [s[0] for s in data['lamer'].values() if ending(s[0]) == 'mine']
L = [a['steps'][-1] for a in A1]
safe = [x for x in L if x['safe0'] > 0]
forced = [x for x in L if x['safe0'] == 0]
rows.append(['lamer (= independent) attempt 1', len(L), len(safe), len(forced), mean([x['p0'] for x in L]),
             mean([x['p0'] for x in safe]), mean([x['p0'] for x in forced]), mean([x['minP0'] for x in forced]),
             sum(x['p0'] > x['minP0'] + 1e-9 for x in forced), sum(x['t'] == 0 for x in L)])
A1a = [s[0] for s in data['lamer-avail'].values() if ending(s[0]) == 'mine']
La = [a['steps'][-1] for a in A1a]
rows.append(['lamer-avail attempt 1', len(La), sum(x['safe0'] > 0 for x in La), sum(x['safe0'] == 0 for x in La), mean([x['p0'] for x in La]),
             mean([x['p0'] for x in La if x['safe0'] > 0]), mean([x['p0'] for x in La if x['safe0'] == 0]), mean([x['minP0'] for x in La if x['safe0'] == 0]),
             sum(x['p0'] > x['minP0'] + 1e-9 for x in La if x['safe0'] == 0), sum(x['t'] == 0 for x in La)])
table(['row', 'mine deaths', 'a provably safe cell existed', 'forced guess (no safe cell)', 'mean P(mine) of death click',
       'mean P, avoidable deaths', 'mean P, forced', 'mean best P available, forced', 'forced but not the best guess',
       'died on first click'], rows)

# Oracle ceiling on this checkpoint: sessions that fail all 3 attempts and end an attempt 2/3 on a named mine.
print('## Q4b. What removing named mines could flip on this checkpoint (upper bound: sessions)\n')
rows = []
for r in ('lamer', 'lamer-avail'):
    fail = [s for s in data[r].values() if not any(a['success'] for a in s.values())]
    named_end = [s for s in fail if any(k > 0 and ending(s[k]) == 'mine' and s[k]['steps'][-1]['clickIsNamed'] for k in s)]
    other = Counter()
    for s in fail:
        for k in (1, 2):
            if k in s:
                a = s[k]
                e = ending(a)
                if e == 'mine':
                    e = 'named mine' if a['steps'][-1]['clickIsNamed'] else ('other mine, safe cell existed' if a['steps'][-1]['safe1'] > 0 else 'other mine, forced')
                other[e] += 1
    rows.append([r, len(data[r]), len(fail), len(named_end), f'{100 * len(named_end) / len(data[r]):.1f}',
                 ', '.join(f'{k}: {v}' for k, v in sorted(other.items()))])
table(['row', 'tasks', 'sessions failing all 3', 'of which an attempt 2/3 ended on a named mine',
       'ceiling of oracle gain (pass@3 points)', 'how attempts 2/3 of failing sessions end'], rows)

# ---------------------------------------------------------------- Q1b paired endings of attempt 2 after a mine death
def end2(a):
    e = ending(a)
    if e == 'mine':
        return 'N' if a['steps'][-1]['clickIsNamed'] else 'other mine'
    if e == 'turn cap':
        return 'cap, >=1 invalid' if any(st['invalid'] for st in a['steps']) else 'cap, all valid'
    return e


print('## Q1b. Attempt 2 after an attempt-1 mine death, paired by task (rows: independent, columns: lamer)\n')
cats = ['win', 'N', 'other mine', 'cap, >=1 invalid', 'cap, all valid']
X = Counter()
for t in tasks:
    a, b = data['independent'][t], data['lamer'][t]
    if 1 in a and ending(a[0]) == 'mine':
        X[(end2(a[1]), end2(b[1]))] += 1
rows = [[ci] + [X[(ci, cj)] for cj in cats] + [sum(X[(ci, cj)] for cj in cats)] for ci in cats]
rows.append(['total'] + [sum(X[(ci, cj)] for ci in cats) for cj in cats] + [sum(X.values())])
table(['independent \\ lamer'] + cats + ['total'], rows)
rows = []
for r in ROWS:
    c = Counter(end2(s[1]) for s in data[r].values() if 1 in s and ending(s[0]) == 'mine')
    rows.append([r, sum(c.values())] + [c[k] for k in cats])
table(['row', 'a2 after a1 mine death'] + cats, rows)

# ---------------------------------------------------------------- Q1c attempt-2 outcome given the click at the death state
print('## Q1c. Attempt-2 outcome by the first valid click at the death state\n')
rows = []
for r in ROWS:
    for lab in ('N', 'other mine', 'safe cell', 'only invalid'):
        xs = [x for x in details[r] if x.get('hitv') is not None or x.get('reached') is not False]
        sel = []
        for x in details[r]:
            if x.get('reached') is False:
                continue
            h = x['hitv']
            k = 'only invalid' if h is None else ('N' if h['idx'] == x['N'] else ('other mine' if h['mine'] else 'safe cell'))
            if k == lab:
                sel.append(x)
        c = Counter(end2(x['a2']) for x in sel)
        inv = sum(x['inv_there'] for x in sel)
        rows.append([r, lab, len(sel), inv] + [c[k] for k in cats])
table(['row', 'click at death state', 'n', 'invalid clicks made at the death state'] + cats, rows)

# ---------------------------------------------------------------- Q2b certainty of the other-mine clicks
print('## Q2b. Attempt-2 clicks on a mine other than N (after a1 mine death): P(mine | board + N) of the click\n')
rows = []
for r in ROWS:
    C = [st for x in details[r] for st in x['a2']['steps'] if not st['invalid'] and st['mine'] and not st['clickIsNamed']]
    rows.append([r, len(C), sum(st['p1'] == 1 for st in C), sum(0.5 < st['p1'] < 1 for st in C), sum(st['p1'] <= 0.5 for st in C),
                 sum(st['adjNamed'] for st in C), sum(st['safe1'] > 0 for st in C)])
table(['row', 'other-mine clicks', 'certain mine (P=1)', '0.5<P<1', 'P<=0.5', 'adjacent to N', 'a safe cell existed'], rows)

# ---------------------------------------------------------------- Q3c what the invalid clicks are
print('## Q3c. Invalid clicks in attempts 2-3 (all on revealed cells): repeats and loops\n')
rows = []
for r in ('lamer', 'independent'):
    for k in (0, 1, 2):
        A = [s[k] for s in data[r].values() if k in s]
        inv = rep = rev_by_cascade = 0
        per = Counter()
        for a in A:
            prev = None
            m = 0
            for st in a['steps']:
                if st['invalid']:
                    inv += 1
                    m += 1
                    rep += prev is not None and st['act'].strip() == prev
                prev = st['act'].strip()
            per[min(m, 4)] += 1
        rows.append([r, k + 1, len(A), inv, rep, ' '.join(f"{i if i < 4 else '4+'}:{per[i]}" for i in sorted(per))])
table(['row', 'attempt', 'attempts', 'invalid clicks', 'same cell as the click just before', 'attempts by invalid count (n:attempts)'], rows)

# ---------------------------------------------------------------- Q4c first-click deaths
A1 = [s[0] for s in data['lamer'].values() if ending(s[0]) == 'mine']
fc = [a['steps'][-1] for a in A1 if len(a['steps']) == 1]
print(f"Attempt-1 deaths on the first click: {len(fc)}, with a provably safe cell: {sum(x['safe0'] > 0 for x in fc)}, "
      f"mean P(mine) of the click {mean([x['p0'] for x in fc])}\n")

# ---------------------------------------------------------------- Q1 split: deaths on the first click reach the state trivially
print('## Q1 split. Reaching the death state, by whether attempt 1 died on its first valid click\n')
rows = []
for r in ROWS:
    c = Counter()
    for s in data[r].values():
        if 1 not in s or ending(s[0]) != 'mine':
            continue
        d = s[0]['steps'][-1]['obs']
        first = sum(not st['invalid'] for st in s[0]['steps']) == 1
        c[(first, any(st['obs'] == d for st in s[1]['steps']))] += 1
    rows.append([r, pct(c[(True, True)], c[(True, True)] + c[(True, False)]), pct(c[(False, True)], c[(False, True)] + c[(False, False)])])
table(['row', 'a1 died on its first click: a2 at that state', 'a1 died later: a2 reaches the death state'], rows)
