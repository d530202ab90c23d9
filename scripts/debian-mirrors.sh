#!/bin/bash
# The Debian archive mirrors of this machine's apt sources, one per line,
# as apt itself parses them (sources.list, *.list, deb822 *.sources): those
# whose Release file says Origin: Debian (not the security archive), or,
# before any `apt-get update`, those that serve this machine's release.
# Used by setup-deps.sh (where to add entries) and fetch-upstream.sh
# (where to download the pinned tarball); never a hard-coded host.
set -u

m=$(apt-get indextargets --format '$(ORIGIN)|$(LABEL)|$(REPO_URI)' 2>/dev/null |
    awk -F'|' '$1 == "Debian" && $2 !~ /Security/ && !seen[$3]++ { print $3 }')
if [ -z "$m" ]; then
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    m=$(apt-get indextargets --no-release-info \
            --format '$(RELEASE)|$(REPO_URI)' 2>/dev/null |
        awk -F'|' -v c="$codename" \
            'c != "" && ($1 == c || $1 == c "-updates") && !seen[$2]++ { print $2 }')
fi
[ -z "$m" ] || echo "$m"
