# How phrase-table.gz was cut from ../shared/data/moses-en-fr/phrase-table.gz: every source phrase of
# up to 3 words occurring in dev.en or test.en, its 5 targets of highest p(e|f) (3rd score), table order.
# Run from this directory: python make_table.py dev.en test.en
import gzip, sys
from collections import defaultdict
srcs = set()
for f in sys.argv[1:]:
    for line in open(f, encoding="utf-8"):
        w = line.split()
        for i in range(len(w)):
            for n in range(1, 4):
                if i + n <= len(w):
                    srcs.add(" ".join(w[i:i+n]))
groups = defaultdict(list)
with gzip.open("/work/shared/data/moses-en-fr/phrase-table.gz", "rt", encoding="utf-8") as f:
    for line in f:
        s = line.split(" ||| ", 1)[0]
        if s in srcs:
            groups[s].append(line)
out = []
for s in sorted(groups, key=lambda x: x.encode()):
    lines = groups[s]
    keep = sorted(range(len(lines)), key=lambda i: -float(lines[i].split(" ||| ")[2].split()[2]))[:5]
    out.extend(lines[i] for i in sorted(keep))
with gzip.GzipFile("phrase-table.gz", "wb", mtime=0) as g:
    g.write("".join(out).encode())
print(len(out), len(groups), len(srcs))
