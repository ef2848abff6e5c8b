"""Properties of :func:`s3rm.collect.secrets.mask_text` over generated secrets (docs/research-tools.md#secret-masking).

Hypothesis runs derandomized by default (tests/conftest.py); ``S3RM_HYPOTHESIS=explore`` draws new examples.
"""
from __future__ import annotations

import string

from hypothesis import example, given
from hypothesis import strategies as st

from s3rm.collect.secrets import mask_text

AWS_ID = st.text(string.ascii_uppercase + string.digits, min_size=16, max_size=16).map(lambda s: "AKIA" + s)
#: Any 40 characters of the alphabet AWS secret keys use, including ones split by "/" or "+" into short runs
#: that do not look random on their own.
AWS_SECRET = st.text(string.ascii_letters + string.digits + "+/", min_size=40, max_size=40)
CONTEXTS = (
    "fixed, rotated {id} / {secret}",
    "{id} {secret}",
    "old pair was {id}, {secret} (revoked)",
    "secret {secret} for key {id}",
    "export AWS_ACCESS_KEY_ID={id} AWS_SECRET_ACCESS_KEY={secret}",
)


@given(key_id=AWS_ID, secret=AWS_SECRET, context=st.sampled_from(CONTEXTS), filename=st.sampled_from(
    ("candidate.txt", "notes.md", "deploy.env", "settings.py")))
@example(key_id="AKIAABCDEFGHIJKLMNOP", secret="HsXb7hEJy+acccqIeAJETqEK/iKk+lAleyevH7u5",
         context=CONTEXTS[0], filename="candidate.txt")
@example(key_id="AKIAABCDEFGHIJKLMNOP", secret="rSovt1mo+1HGlYv/8R6LsP4G7z+ixupqTlKCfoRj",
         context=CONTEXTS[0], filename="candidate.txt")
def test_an_aws_key_pair_in_free_text_is_masked_whole(key_id, secret, context, filename):
    line = context.format(id=key_id, secret=secret)
    result = mask_text(line, filename)
    assert key_id not in result.text
    for i in range(0, 29, 4):
        assert secret[i:i + 12] not in result.text, (line, result.text)
    assert result.counts["aws_access_key"] == 1



def test_words_beside_a_key_id_stay_readable():
    line = "fixed, rotated AKIAABCDEFGHIJKLMNOP yesterday after the audit, see the runbook"
    assert mask_text(line, "notes.md").text == "fixed, rotated [MASKED:aws_access_key] yesterday after the audit, see the runbook"
