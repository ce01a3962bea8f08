"""``CountingMediaStore``: a wrapper that counts the calls made to a store (see ``mediastash._counting``).

Re-exported here for tests, benchmarks and users; the demo, the CLI and tune
import the private module so that production code does not depend on the test kit.
"""

from mediastash._counting import CountingMediaStore

__all__ = ['CountingMediaStore']
