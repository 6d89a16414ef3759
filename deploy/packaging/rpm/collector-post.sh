# storwatch-collector %post (EL9): a random token file when there is none (the unit refuses to
# start without tokens), reload. $1 = 1 on install, 2 on upgrade.
install -d -m 0755 /etc/storwatch
if [ ! -e /etc/storwatch/collector.tokens ]; then
    (umask 077
     tok=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')
     printf '# name:token, one per line\nagents:%s\n' "$tok" > /etc/storwatch/collector.tokens)
    echo "storwatch-collector: created /etc/storwatch/collector.tokens (token name 'agents')"
fi
chmod 0600 /etc/storwatch/collector.tokens
systemctl daemon-reload >/dev/null 2>&1 || :
if [ "$1" -eq 1 ]; then systemctl preset storwatch-collector.service >/dev/null 2>&1 || :; fi
if [ "$1" -ge 2 ]; then systemctl try-restart storwatch-collector.service >/dev/null 2>&1 || :; fi
