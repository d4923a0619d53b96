import json,sys
for path in sys.argv[1:]:
    s=json.load(open(path))['sessions']
    n=same=0
    for x in s:
        at=x['attempts']
        if len(at)<2: continue
        a1,a2=at[0],at[1]
        if a1['success'] or a1['endReason']!='done' or not a1['trajectory']: continue
        if a2['success'] or a2['endReason']!='done' or not a2['trajectory']: continue
        n+=1; same+= a1['trajectory'][-1].strip()==a2['trajectory'][-1].strip()
    print(path.split('/')[-2], 'attempt 2 ending where attempt 1 ended (mine or last click):', same, '/', n)
