// getaddrinfo_shim.c: an LD_PRELOAD library for test_bootstrap_security.sh. The name
// "zero-shim-host" resolves to the numeric addresses in SHIM_ADDRS (comma-separated, in
// that order), so that a test can give rank 0 a host with an address this machine lacks
// beside one it has, which no resolver configuration of a test machine can be relied on for.
// Every other name goes to the C library's getaddrinfo.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*gai_fn)(const char *, const char *, const struct addrinfo *, struct addrinfo **);

int getaddrinfo(const char *node, const char *service, const struct addrinfo *hints, struct addrinfo **res) {
    gai_fn real = (gai_fn)dlsym(RTLD_NEXT, "getaddrinfo");
    const char *list = getenv("SHIM_ADDRS");
    if (!node || strcmp(node, "zero-shim-host") != 0 || !list) return real(node, service, hints, res);
    struct addrinfo h = hints ? *hints : (struct addrinfo){0};
    h.ai_flags |= AI_NUMERICHOST;
    struct addrinfo *head = NULL, **tail = &head;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *a = strtok_r(buf, ",", &save); a; a = strtok_r(NULL, ",", &save)) {
        struct addrinfo *one = NULL;
        int rc = real(a, service, &h, &one);
        if (rc != 0) {
            if (head) freeaddrinfo(head);
            return rc;
        }
        *tail = one;
        while (*tail) tail = &(*tail)->ai_next;
    }
    *res = head;
    return head ? 0 : EAI_NONAME;
}
