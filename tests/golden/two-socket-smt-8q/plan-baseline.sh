exit 0
#!/bin/sh
# nettune plan --profile baseline: 0 change(s), computed on capture $FIXTURES/two-socket-smt-8q.
# For review: `nettune apply` makes the same changes with a journal and `nettune rollback`; this script keeps no undo.
set -e
