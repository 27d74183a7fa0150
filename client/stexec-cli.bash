# bash completion for stexec-cli. Commands, options and what each argument
# is are read from stexec-cli's own help, sessions and tool names from the
# daemon, so nothing here goes stale when the CLI changes.

# The kind of positional argument N (0-based) of a command, from its usage
# line: SESSION, TOOL, JSON, TOOL_USE_ID, ... ("[TOOL JSON]..." repeats).
_stexec_cli_kind()
{
	local cli=$1 cmd=$2 n=$3 usage w words=()
	usage=$("$cli" help "$cmd" 2>/dev/null | head -n 1)
	usage=${usage#usage: stexec-cli "$cmd"}
	for w in $(sed 's/\[--[^]]*\]//g' <<<"$usage"); do
		case $w in
		\[*\]...) ;;
		\[*) words+=("${w#[}") ;;
		*) words+=("${w%]}") ;;
		esac
	done
	if [[ $usage == *"[TOOL JSON]..."* ]]; then
		words=()
		for ((w = 0; w <= n; w++)); do
			words+=(TOOL JSON)
		done
	fi
	printf '%s\n' "${words[n]}"
}

_stexec_cli()
{
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]}
	local cli=${COMP_WORDS[0]} cmd= usage w i npos=0 sock=() args=()

	COMPREPLY=()
	# The command, the socket to ask, and how many positionals precede.
	for ((i = 1; i < COMP_CWORD; i++)); do
		w=${COMP_WORDS[i]}
		case $w in
		--socket)
			sock=(--socket "${COMP_WORDS[i + 1]}")
			((i++))
			;;
		--socket=*) sock=("$w") ;;
		--*=*) ;;
		-*)
			# An option followed by its VALUE in the usage line.
			[ -n "$cmd" ] && [[ $usage == *"[$w "[A-Z]* ]] && ((i++))
			;;
		*)
			if [ -z "$cmd" ]; then
				cmd=$w
				usage=$("$cli" help "$cmd" 2>/dev/null | head -n 1)
			else
				args+=("$w")
				((npos++))
			fi
			;;
		esac
	done

	case $prev in
	--socket | --tools)
		mapfile -t COMPREPLY < <(compgen -f -- "$cur")
		return
		;;
	--cwd)
		mapfile -t COMPREPLY < <(compgen -d -- "$cur")
		return
		;;
	esac
	if [[ $cur == -* ]]; then
		w="--socket --json --help"
		[ -z "$cmd" ] && w+=" --version"
		[ -n "$cmd" ] && w+=" $("$cli" help "$cmd" 2>/dev/null |
			grep -o -- '--[a-z][a-z-]*' | sort -u)"
		mapfile -t COMPREPLY < <(compgen -W "$w" -- "$cur")
		return
	fi
	if [ -z "$cmd" ] || { [ "$cmd" = help ] && [ "$npos" -eq 0 ]; }; then
		w=$("$cli" help 2>/dev/null |
			awk '/^Commands:/ { on = 1; next } on && NF == 0 { exit }
			     on { print $1 }')
		mapfile -t COMPREPLY < <(compgen -W "$w" -- "$cur")
		return
	fi
	case $(_stexec_cli_kind "$cli" "$cmd" "$npos") in
	SESSION)
		w=$("$cli" "${sock[@]}" sessions 2>/dev/null | awk 'NR > 1 { print $1 }')
		;;
	TOOL)
		w=$("$cli" "${sock[@]}" tools 2>/dev/null | awk 'NR > 1 { print $1 }')
		;;
	JOB)
		# The jobs of the session named before it.
		w=$("$cli" "${sock[@]}" jobs "${args[0]}" 2>/dev/null |
			awk 'NR > 1 { print $1 }')
		;;
	*) return ;;
	esac
	mapfile -t COMPREPLY < <(compgen -W "$w" -- "$cur")
}

complete -F _stexec_cli stexec-cli
