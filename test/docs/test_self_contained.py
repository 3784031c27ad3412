"""The repository is self-contained: no tracked file points outside it (../shared, the papers by file number), and
every citation of docs/DESIGN.md names a section and every source key a reference that the file has."""
import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OUTSIDE = re.compile(r'\.\./shared|shared/DESIGN|shared/papers|paper 00\d|seed 00\d|\b00\d_[0-9a-f]{16}')


def _tracked_text_files():
    names = subprocess.run(['git', 'ls-files', '-z'], cwd=REPO, capture_output=True, check=True).stdout.split(b'\0')
    for name in filter(None, names):
        path = REPO / name.decode()
        if not path.is_file() or path.stat().st_size > 2_000_000:
            continue
        data = path.read_bytes()
        if b'\0' not in data[:8192]:                     # text files only
            yield path, data.decode('utf-8', 'replace')


def test_no_tracked_file_points_outside_the_repository():
    hits = [f'{p.relative_to(REPO)}:{text[:m.start()].count(chr(10)) + 1}: {m.group(0)}'
            for p, text in _tracked_text_files() if p.name != 'test_self_contained.py'
            for m in OUTSIDE.finditer(text)]
    assert not hits, 'references outside the repository:\n' + '\n'.join(hits)


def test_design_citations_resolve():
    design = (REPO / 'docs' / 'DESIGN.md').read_text()
    sections = set(re.findall(r'^## (\d+)\. ', design, re.M))
    keys = set(re.findall(r'^- \*\*\[([\w-]+)\]\*\*', design, re.M))
    assert {'1', '2', '3', '4', '5', '6'} <= sections and {'STRING', 'ESPR'} <= keys
    cited, used = [], []
    for p, text in _tracked_text_files():
        if p.suffix not in ('.py', '.md'):
            continue
        for m in re.finditer(r'(?:DESIGN\.md|DESIGN) §(\d+)', text):
            cited.append((p.relative_to(REPO), m.group(1)))
        used += [(p.relative_to(REPO), k) for k in re.findall(r'\[(STRING|ESPR|Su21|PE-survey)\]', text)]
    assert len(cited) >= 10 and used                     # the code does cite it
    assert not [c for c in cited if c[1] not in sections], 'citations of missing DESIGN sections'
    assert not [u for u in used if u[1] not in keys], 'reference keys missing from docs/DESIGN.md §6'
    bare = [(p.relative_to(REPO), m.group(0)) for p, text in _tracked_text_files() if p.suffix in ('.py', '.md')
            for m in re.finditer(r'(?<![/\w.])DESIGN(?:\.md)? §', text)]
    assert not bare, f'cite docs/DESIGN.md with its path: {bare}'
