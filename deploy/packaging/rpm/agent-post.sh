# storwatch-agent %post (EL9): user for the unprivileged drop-in, state directory, reload.
# $1 = 1 on install, 2 on upgrade.
systemd-sysusers /usr/lib/sysusers.d/storwatch.conf || :
install -d -m 0700 /var/lib/storwatch
[ -f /etc/storwatch/agent.token ] && chmod 0600 /etc/storwatch/agent.token
systemctl daemon-reload >/dev/null 2>&1 || :
# like %systemd_post: apply the distribution's preset on first install only
if [ "$1" -eq 1 ]; then systemctl preset storwatch-agent.service >/dev/null 2>&1 || :; fi
if [ "$1" -ge 2 ]; then systemctl try-restart storwatch-agent.service >/dev/null 2>&1 || :; fi
