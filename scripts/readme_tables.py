"""Rewrite the README's generated tables (node parameters from node_params.PARAMS, topics from ros/interface.TOPICS).

    python scripts/readme_tables.py           # rewrite README.md in place
    python scripts/readme_tables.py --check   # exit 1 if README.md is out of date (test/test_readme_tables.py)
"""
import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from string_perception.ros.interface import render_readme  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    p.add_argument('--readme', type=Path, default=REPO / 'README.md')
    p.add_argument('--check', action='store_true', help='only report whether the README is up to date')
    a = p.parse_args(argv)
    text = a.readme.read_text()
    new = render_readme(text)
    if a.check:
        print('up to date' if new == text else f'{a.readme} is out of date: run python scripts/readme_tables.py')
        return 0 if new == text else 1
    if new != text:
        a.readme.write_text(new)
    print(f'wrote {a.readme}' if new != text else 'up to date')
    return 0


if __name__ == '__main__':
    sys.exit(main())
