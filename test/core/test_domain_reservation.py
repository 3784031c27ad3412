"""domain_reservation.reserved_domain_id: ids in 1..MAX_DOMAIN_ID, never one another holder has, free again after."""
import os
import subprocess
import sys

from string_perception.domain_reservation import reserved_domain_id
from string_perception.dds_env import MAX_DOMAIN_ID


def test_nested_reservations_get_distinct_ids_and_skip_a_held_one():
    with reserved_domain_id() as a:
        assert 1 <= a <= MAX_DOMAIN_ID
        with reserved_domain_id(a) as b:             # asked to start at the held id: moves on to the next free one
            assert b != a and 1 <= b <= MAX_DOMAIN_ID
    with reserved_domain_id(a) as again:             # released at the end of the block
        assert again == a


def test_an_id_held_by_another_process_is_skipped():
    with reserved_domain_id() as held:
        code = ('from string_perception.domain_reservation import reserved_domain_id\n'
                f'with reserved_domain_id({held}) as d:\n    print(d)')
        out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=60,
                             env={**os.environ, 'PYTHONPATH': os.pathsep.join(sys.path)})
        assert out.returncode == 0, out.stderr
        assert int(out.stdout) != held
