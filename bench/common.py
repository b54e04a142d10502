"""What the bench scripts share: running a command and failing with its
output."""
import subprocess
import sys


def run(cmd, **kw):
    """Runs `cmd` (a list), returns its stdout and stderr together; on a
    non-zero exit, exits naming the command and the end of its output."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, **kw)
    if p.returncode:
        sys.exit("failed: %s\n%s" % (" ".join(cmd), p.stdout[-3000:]))
    return p.stdout
