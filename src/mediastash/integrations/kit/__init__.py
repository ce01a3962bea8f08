"""The integration kit: what every framework integration composes (``docs/integrations.md``).

One versioned envelope format (``envelope``), one placeholder builder
(``placeholders``), the slot handling shared by host envelopes
(``host_slots``), and the registry of payload-site recognisers
(``recognisers``; ``docs/adding-a-framework.md``). Nothing here imports a
framework.
"""

from mediastash.integrations.kit.envelope import ENVELOPE_FORMAT, ENVELOPE_KEY, READ_FORMATS, Slot
from mediastash.integrations.kit.placeholders import PLACEHOLDER_PREFIX, is_placeholder, placeholder_text
from mediastash.integrations.kit.recognisers import RECOGNISERS, Recognisers, compose

__all__ = [
    'ENVELOPE_FORMAT',
    'ENVELOPE_KEY',
    'PLACEHOLDER_PREFIX',
    'READ_FORMATS',
    'RECOGNISERS',
    'Recognisers',
    'Slot',
    'compose',
    'is_placeholder',
    'placeholder_text',
]
