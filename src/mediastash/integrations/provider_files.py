"""Provider file references under their first name; their home is ``integrations.pydantic_ai.provider_files``.

They belong to the pydantic-ai integration; this module re-exports the same
objects so ``mediastash.integrations.provider_files`` keeps importing, as the
API reference says (``docs/api/integrations.md``).
"""

from mediastash.integrations.pydantic_ai.provider_files import *  # noqa: F403  (the same names, the same objects)
from mediastash.integrations.pydantic_ai.provider_files import __all__ as __all__
