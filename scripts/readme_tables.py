"""Rewrite the generated tables of the docs pages (ros/interface.TABLE_PAGES): the node's parameters from
node_params.PARAMS and topics from ros/interface.TOPICS in docs/node.md, the policy node's in docs/policy.md.

    python scripts/readme_tables.py           # rewrite the pages in place
    python scripts/readme_tables.py --check   # exit 1 if a page is out of date (test/docs/test_readme_tables.py)
"""
import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from string_perception.ros.interface import TABLE_PAGES, render_tables  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--root', type=Path, default=REPO, help='repository root holding the docs pages')
    p.add_argument('--check', action='store_true', help='only report whether the pages are up to date')
    a = p.parse_args(argv)
    stale = []
    for page, keys in TABLE_PAGES.items():
        path = a.root / page
        text = path.read_text()
        new = render_tables(text, keys)
        if new == text:
            continue
        stale.append(path)
        if not a.check:
            path.write_text(new)
    if a.check:
        for path in stale:
            print(f'{path} is out of date: run python scripts/readme_tables.py')
        print('up to date' if not stale else f'{len(stale)} page(s) out of date')
        return 1 if stale else 0
    print('\n'.join(f'wrote {path}' for path in stale) or 'up to date')
    return 0


if __name__ == '__main__':
    sys.exit(main())
