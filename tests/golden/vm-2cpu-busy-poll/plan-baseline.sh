exit 0
#!/bin/sh
# nettune plan --profile baseline: 2 change(s), computed on capture $FIXTURES/vm-2cpu-busy-poll.
# For review: `nettune apply` makes the same changes with a journal and `nettune rollback`; this script keeps no undo.
set -e

# kernel
# kernel default (was 50)
sysctl -w net.core.busy_poll=0
# kernel default (was 50)
sysctl -w net.core.busy_read=0
