"""Session servers (moto, SeaweedFS, the MongoDB-wire server) are available to every test module."""

pytest_plugins = ['tests.s3_servers', 'tests.mongo_support', 'tests.postgres_support']
