#!/bin/sh
# tools/check-links.sh - every relative link in the Markdown docs resolves.
#
# Checks README.md and every tracked *.md file under docs/ (or the files
# given as arguments): each [text](target) and <img src> whose target is not
# a URL (http:, https:, mailto:) must name a file or folder that exists,
# relative to the linking file, and a #fragment on a Markdown target must
# match one of that file's headings (GitHub's anchor rules: lower case,
# punctuation dropped, spaces to hyphens). Links inside fenced code blocks
# and inline code are ignored. Prints one line per broken link and exits 1
# if there is any; `make docs` runs it.
set -eu
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
    set -- README.md $(git ls-files 'docs/*.md' 2>/dev/null || ls docs/*.md)
fi
exec python3 - "$@" <<'EOF'
import os, re, sys

LINK = re.compile(r'!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)')
SRC = re.compile(r'<img[^>]*\ssrc="([^"]+)"')

def strip_code(text):
    out, fence = [], None
    for line in text.split('\n'):
        m = re.match(r'\s*(```+|~~~+)', line)
        if m:
            if fence is None:
                fence = m.group(1)[:3]
            elif m.group(1).startswith(fence):
                fence = None
            out.append('')
            continue
        out.append('' if fence else re.sub(r'`[^`]*`', '', line))
    return out

def slug(heading):
    h = re.sub(r'`', '', heading.strip().lower())
    h = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', h)
    h = re.sub(r'[^\w\- ]', '', h)
    return h.replace(' ', '-')

anchors_cache = {}
def anchors(path):
    if path not in anchors_cache:
        seen, found = {}, set()
        with open(path, encoding='utf-8') as f:
            lines = f.read().split('\n')
        fence = None
        for line in lines:
            m = re.match(r'\s*(```+|~~~+)', line)
            if m:
                fence = None if fence else m.group(1)[:3]
                continue
            if fence:
                continue
            m = re.match(r'#{1,6}\s+(.*?)\s*#*\s*$', line)
            if m:
                s = slug(m.group(1))
                n = seen.get(s, 0)
                seen[s] = n + 1
                found.add(s if n == 0 else '%s-%d' % (s, n))
        anchors_cache[path] = found
    return anchors_cache[path]

bad = 0
for doc in sys.argv[1:]:
    with open(doc, encoding='utf-8') as f:
        lines = strip_code(f.read())
    base = os.path.dirname(doc)
    for no, line in enumerate(lines, 1):
        for target in LINK.findall(line) + SRC.findall(line):
            if re.match(r'[a-z][a-z0-9+.-]*:', target, re.I):
                continue
            path, _, frag = target.partition('#')
            dest = os.path.normpath(os.path.join(base, path)) if path else doc
            why = None
            if not os.path.exists(dest):
                why = 'no such file'
            elif frag and dest.endswith('.md') and frag.lower() not in anchors(dest):
                why = 'no heading #%s in %s' % (frag, dest)
            if why:
                print('%s:%d: broken link %s (%s)' % (doc, no, target, why))
                bad += 1
if bad:
    print('check-links: %d broken link(s)' % bad, file=sys.stderr)
    sys.exit(1)
print('check-links: %d file(s), every relative link resolves' % len(sys.argv[1:]))
EOF
