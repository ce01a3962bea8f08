"""What ``OffloadingStepStore`` and ``OffloadingConversationStore`` share: their keywords, checked alike, and the
``Offloader`` those build (one place, so the two wrappers cannot drift apart in what they accept)."""

from __future__ import annotations

from typing import ClassVar, Generic, TypeVar, Unpack

from mediastash.errors import InvalidArgumentError
from mediastash.integrations.pydantic_ai._typed import RESTORE_MODES, Offloader, RestoreMode
from mediastash.reference_keys import ReferenceKey, reference_key_of
from mediastash.stores.protocols import MediaStore
from mediastash.walker import WalkOptions
from mediastash.walker.internal import WalkKeywords, options_from_keywords

__all__ = ['MessageStoreWrapper']

InnerStore = TypeVar('InnerStore')


class MessageStoreWrapper(Generic[InnerStore]):
    """A store of pydantic-ai messages (``inner``) whose payloads live in ``media_store``.

    Subclasses name themselves in ``_wrapper_name`` (deprecation warnings and
    placeholder texts say it) and may refuse an ``inner`` in ``_check_inner``.
    """

    _wrapper_name: ClassVar[str]

    def __init__(
        self,
        inner: InnerStore,
        *,
        media_store: MediaStore,
        options: WalkOptions | None = None,
        restore: RestoreMode = 'bytes',
        reference_key: ReferenceKey | bytes | None = None,
        **walk_keywords: Unpack[WalkKeywords],
    ) -> None:
        self._check_inner(inner)
        if not isinstance(restore, str) or restore not in RESTORE_MODES:
            raise InvalidArgumentError('restore', "'bytes' or 'references'", restore)
        self.inner = inner
        self.media_store = media_store
        self.restore_mode: RestoreMode = restore
        """The ``restore`` given (named so it never hides an ``inner`` method called ``restore``)."""
        chosen = options_from_keywords(self._wrapper_name, options, walk_keywords, structured=True)
        self._offloader = Offloader(
            media_store, options=chosen, reference_key=reference_key_of(reference_key), reader=self._wrapper_name
        )

    def _check_inner(self, inner: InnerStore) -> None:
        """Refuse an ``inner`` this wrapper cannot serve (here any is accepted; a subclass checks what it needs)."""
