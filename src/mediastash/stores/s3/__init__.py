"""S3 (and S3-compatible) media store on aiobotocore; needs the ``s3`` extra.

The store lives in ``_store``, its settings and URL form (``S3Options``) in
``_options``; the other private modules are its parts
(multipart upload, presigning, metadata headers, pipelined hashing, retries,
log redaction, the opt-in known-keys cache).
"""

from mediastash.stores.s3._options import PutCheck, S3Options
from mediastash.stores.s3._presign import PresignedUrls
from mediastash.stores.s3._store import AUTO_HEAD_FROM, S3MediaStore

__all__ = ['AUTO_HEAD_FROM', 'PresignedUrls', 'PutCheck', 'S3MediaStore', 'S3Options']
