exit 0
#!/bin/sh
# nettune plan --profile baseline: 0 change(s), computed on capture $FIXTURES/one-socket-ice-16q.
# For review: `nettune apply` makes the same changes with a journal and `nettune rollback`; this script keeps no undo.
set -e
