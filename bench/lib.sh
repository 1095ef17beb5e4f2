# Shared by the bench scripts (source it after setting child="").

# run runs a command in the background and waits for it: bash runs a trap
# only between commands, and `wait` is one it interrupts, so a Ctrl-C or a
# TERM stops the run at once and the script's trap stops the command
# (it kills $child).
run() {
	local rc=0
	"$@" &
	child=$!
	wait "$child" || rc=$?
	child=""
	return "$rc"
}
