/*
 * Launcher of one program of the bench bundle (scripts/bench-bundle.sh).
 *
 * Built static, so that the host's dynamic loader never runs it (and never
 * preloads xensim's shim into it). Installed as <path>, next to the real
 * program <path>.real, it runs that program with the bundle's own dynamic
 * loader and libraries (<root>/lib, found by walking up from <path> to the
 * directory holding .xenblk-bundle), and passes LD_PRELOAD on to that
 * loader instead of the host's. Nothing outside the bundle is used or
 * changed, so the bundle runs on any x86-64 Linux, whatever its glibc.
 *
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    char self[PATH_MAX], root[PATH_MAX], real[PATH_MAX + 8];
    char loader[PATH_MAX + 64], libs[PATH_MAX + 8], mark[PATH_MAX + 32];
    const char *preload = getenv("LD_PRELOAD");
    char **args = calloc(argc + 9, sizeof(*args));
    ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
    char *slash;
    int i, n = 0;

    if (len <= 0 || !args) {
        perror("bundle-launcher: /proc/self/exe");
        return 127;
    }
    self[len] = '\0';
    snprintf(real, sizeof(real), "%s.real", self);

    strcpy(root, self);
    for (;;) {
        slash = strrchr(root, '/');
        if (!slash || slash == root) {
            fprintf(stderr, "bundle-launcher: %s is not in a bundle\n", self);
            return 127;
        }
        *slash = '\0';
        snprintf(mark, sizeof(mark), "%s/.xenblk-bundle", root);
        if (access(mark, F_OK) == 0) {
            break;
        }
    }
    snprintf(loader, sizeof(loader), "%s/lib/ld-linux-x86-64.so.2", root);
    snprintf(libs, sizeof(libs), "%s/lib", root);

    args[n++] = loader;
    args[n++] = "--library-path";
    args[n++] = libs;
    if (preload && *preload) {
        args[n++] = "--preload";
        args[n++] = (char *)preload;
    }
    args[n++] = "--argv0";
    args[n++] = argv[0];
    args[n++] = real;
    for (i = 1; i < argc; i++) {
        args[n++] = argv[i];
    }
    args[n] = NULL;

    unsetenv("LD_PRELOAD");
    execv(loader, args);
    perror(loader);
    return 127;
}
