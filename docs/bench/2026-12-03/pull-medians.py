import sys,re,statistics as st
d={}
for l in open(sys.argv[1]):
    m=re.match(r'(\S+) rate=([\d.]+) cpu=([\d.]+)',l)
    if m: d.setdefault(m.group(1),[]).append((float(m.group(2)),float(m.group(3))))
for sh in ['','--shuffle']:
    e=st.median(r for r,_ in d['emb'+sh])
    for k in ['emb','base','pull','ompibase','ompipull']:
        if k+sh not in d: continue
        rs=[r for r,_ in d[k+sh]]; cs=[c for _,c in d[k+sh]]
        print(f"{k+sh:18} n={len(rs)} median {st.median(rs):6.1f} M/s  ratio {st.median(rs)/e:.2f}x  rates {' / '.join(str(r) for r in rs)}  cpu {min(cs)}-{max(cs)} s")
