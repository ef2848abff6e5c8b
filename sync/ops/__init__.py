"""Operations commands: ``s3rm import``, ``s3rm audit``, ``s3rm evaluate``, ``s3rm collect-candidates``
and ``s3rm research-query``.

Each runs against a configured wiki or gateway (production or the dev stack), or only reads local
files (collect-candidates), and is safe to repeat: a second import makes 0 edits, the others only read.
"""
