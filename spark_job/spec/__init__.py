"""The job spec: ``model`` (the frozen shape and its rules), ``decrypt`` (the PII section), ``parse``
(a JSON document or URI to a validated spec). ``parse`` imports the other two; they import neither."""
