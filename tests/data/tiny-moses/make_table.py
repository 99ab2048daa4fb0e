"""How phrase-table.gz was cut from ../shared/data/moses-en-fr/phrase-table.gz: every source phrase
of up to 3 words occurring in dev.en or test.en, with its 5 targets of highest p(e|f) (3rd score),
in table order. Run from this directory: python make_table.py dev.en test.en"""

import gzip
import sys
from collections import defaultdict

TABLE = "../../../../shared/data/moses-en-fr/phrase-table.gz"

sources = set()
for name in sys.argv[1:]:
    with open(name, encoding="utf-8") as f:
        for line in f:
            w = line.split()
            for i in range(len(w)):
                for n in range(1, 4):
                    if i + n <= len(w):
                        sources.add(" ".join(w[i : i + n]))
groups = defaultdict(list)
with gzip.open(TABLE, "rt", encoding="utf-8") as f:
    for line in f:
        s = line.split(" ||| ", 1)[0]
        if s in sources:
            groups[s].append(line)
out = []
for s in sorted(groups, key=lambda x: x.encode()):
    lines = groups[s]
    keep = sorted(range(len(lines)), key=lambda i: -float(lines[i].split(" ||| ")[2].split()[2]))[:5]
    out.extend(lines[i] for i in sorted(keep))
with gzip.GzipFile("phrase-table.gz", "wb", mtime=0) as g:
    g.write("".join(out).encode())
print(len(out), "lines")
