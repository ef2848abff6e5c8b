"""Operations commands: ``s3rm import``, ``s3rm audit`` and ``s3rm evaluate``.

Each runs against a configured wiki or gateway (production or the dev stack)
and is safe to repeat: a second import makes 0 edits, audit and evaluate only read.
"""
