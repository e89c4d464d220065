import sys, statistics as st, collections
d = collections.defaultdict(list); b = collections.defaultdict(list)
for line in open(sys.argv[1]):
    if line.startswith('#') or not line.strip(): continue
    p = line.split()
    if len(p) < 4 or not p[3]: continue
    d[(p[0], p[1], p[2])].append(float(p[3]))
    if p[4] != '-': b[(p[0], p[1])].append(int(p[4]) / max(1, int(p[5])))
for q in ['wa', 'q8', 'q1']:
    for bin_ in ['old', 'new']:
        o = d.get((bin_, q, 'out'), []); c = d.get((bin_, q, 'checkpoints'), [])
        if not o or not c: continue
        mo, mc = st.median(o), st.median(c)
        print(f"{q} {bin_}: out {mo:.2f} (n={len(o)} {o}), checkpoints {mc:.2f} (n={len(c)} {c}), ratio {mc/mo:.2f}x, mean part {st.median(b[(bin_, q)])/1e6:.1f} MB")
