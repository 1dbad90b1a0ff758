"""PII decryption on the executors: the token format (``envelope``), data keys unwrapped once per
worker (``keys``) and the step between the Arrow batches and the publisher (``decrypting``)."""
