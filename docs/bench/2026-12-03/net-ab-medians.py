import sys,re,statistics as st
# per-round ratios: each block of 6 lines (emb A B B A emb) of one mode is a round
rows=[]
for l in open(sys.argv[1]):
    m=re.match(r'(\S+) rate=([0-9.]+)',l)
    if m: rows.append((m.group(1),float(m.group(2))))
d={}
for k,v in rows: d.setdefault(k,[]).append(v)
for sh in ['','--shuffle']:
    e=st.median(d.get('emb'+sh,[0]))
    for k in ['emb','A','B']:
        v=d.get(k+sh)
        if v: print(f"{k+sh:12} median {st.median(v):7.1f}  ratio of medians {st.median(v)/e:.2f}  n={len(v)} min {min(v)} max {max(v)}")
    # per-round
    blocks=[rows[i:i+6] for i in range(0,len(rows),6)]
    ra=[];rb=[]
    for b in blocks:
        if b[0][0]!='emb'+sh: continue
        em=st.mean([x[1] for x in b if x[0]=='emb'+sh])
        ra.append(st.mean([x[1] for x in b if x[0]=='A'+sh])/em)
        rb.append(st.mean([x[1] for x in b if x[0]=='B'+sh])/em)
    if ra: print(f"  per-round ratio to embedded: A median {st.median(ra):.2f} {[round(x,2) for x in ra]}\n                               B median {st.median(rb):.2f} {[round(x,2) for x in rb]}")
