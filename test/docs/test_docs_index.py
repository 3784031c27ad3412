"""The README fits on a screen and is the index of the docs: at most 250 lines; every relative link in README.md and
in the docs pages (docs/**/*.md) names a file that exists, and every in-page anchor a heading of its page; every
docs/*.md page (the results pages are reached from the pages) is linked from the README."""
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
README = REPO / 'README.md'
PAGES = sorted((REPO / 'docs').rglob('*.md'))
LINK = re.compile(r'!?\[[^\]]*\]\(([^)\s]+)\)')
EXTERNAL = ('http://', 'https://', 'mailto:')


def links(path: Path) -> list[str]:
    """The link targets of a Markdown file, outside fenced code blocks and inline code."""
    out, fenced = [], False
    for line in path.read_text().splitlines():
        if line.lstrip().startswith('```'):
            fenced = not fenced
            continue
        if not fenced:
            out += LINK.findall(re.sub(r'`[^`]*`', '', line))
    return out


def anchors(path: Path) -> set[str]:
    """GitHub's anchors of a Markdown file's headings: lower case, punctuation dropped, spaces become hyphens."""
    out, fenced = set(), False
    for line in path.read_text().splitlines():
        if line.lstrip().startswith('```'):
            fenced = not fenced
        elif not fenced and line.startswith('#'):
            title = line.lstrip('#').strip().lower()
            out.add(re.sub(r'[^\w\- ]', '', title).replace(' ', '-'))
    return out


def test_readme_fits_on_a_screen():
    assert len(README.read_text().splitlines()) <= 250


def test_links_point_at_what_exists():
    assert links(README) and PAGES
    for path in [README, *PAGES]:
        for target in links(path):
            if target.startswith(EXTERNAL):
                continue
            file, _, anchor = target.partition('#')
            dest = (path.parent / file).resolve() if file else path
            assert dest.exists(), f'{path.relative_to(REPO)}: {target} does not exist'
            assert REPO in dest.parents or dest == REPO, f'{path.relative_to(REPO)}: {target} leaves the repository'
            if anchor and dest.suffix == '.md':
                assert anchor in anchors(dest), f'{path.relative_to(REPO)}: {target} names no heading'


def test_every_docs_page_is_in_the_readme_index():
    linked = {(REPO / t.partition('#')[0]).resolve() for t in links(README) if not t.startswith(EXTERNAL)}
    pages = sorted((REPO / 'docs').glob('*.md'))
    assert len(pages) >= 10
    missing = [p.name for p in pages if p.resolve() not in linked]
    assert not missing, f'docs pages not linked from the README index: {missing}'


@pytest.mark.parametrize('text, want', [('# The ROS 2 node', 'the-ros-2-node'),
                                        ('## Bags: play, record and evaluate without `ros2 bag`',
                                         'bags-play-record-and-evaluate-without-ros2-bag'),
                                        ('## 3. Depth → token coordinates (ViTD)', '3-depth--token-coordinates-vitd')])
def test_anchors_follow_github(tmp_path, text, want):
    page = tmp_path / 'x.md'
    page.write_text(f'{text}\n\n```\n# not a heading\n```\n')
    assert anchors(page) == {want}
