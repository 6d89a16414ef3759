# storwatch-collector %preun: stop and disable on erase ($1 = 0), not on upgrade.
if [ "$1" -eq 0 ]; then systemctl --no-reload disable --now storwatch-collector.service >/dev/null 2>&1 || :; fi
