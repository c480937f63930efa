/* The ceiling: the least an HTTP server can do on this machine. One process,
 * edge-triggered epoll, no parsing: every read gets a canned 200 "ok"
 * (and a close if the read contains "Connection: close"). A short read is
 * taken as "drained" (EPOLLRDHUP tells a peer close apart), so a request
 * costs one read and one write, as in gyre.
 *   gcc -O2 -o ceiling bench/ceiling.c && ./ceiling PORT        */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char RESP[] = "HTTP/1.1 200 OK\r\nServer: ceiling\r\nContent-Type: text/plain\r\n"
                           "Content-Length: 2\r\n\r\nok";
static const char RESP_CLOSE[] = "HTTP/1.1 200 OK\r\nServer: ceiling\r\nContent-Type: text/plain\r\n"
                                 "Content-Length: 2\r\nConnection: close\r\n\r\nok";

int main(int argc, char **argv) {
    int port = argc > 1 ? atoi(argv[1]) : 8089, one = 1;
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 511)) { perror("listen"); return 1; }
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = ls}, evs[512];
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    char buf[4096];
    for (;;) {
        int n = epoll_wait(ep, evs, 512, -1);
        for (int i = 0; i < n; i++) {
            int fd = evs[i].data.fd;
            if (fd == ls) {
                int c;
                while ((c = accept4(ls, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    struct epoll_event ce = {.events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.fd = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce);
                }
                continue;
            }
            for (;;) {
                ssize_t r = recv(fd, buf, sizeof buf, 0);
                if (r <= 0) {
                    if (r == 0 || errno != EAGAIN)
                        close(fd);
                    break;
                }
                int cl = memmem(buf, r, "Connection: close", 17) != NULL;
                if (cl) { send(fd, RESP_CLOSE, sizeof RESP_CLOSE - 1, MSG_NOSIGNAL); close(fd); break; }
                send(fd, RESP, sizeof RESP - 1, MSG_NOSIGNAL);
                if ((size_t)r < sizeof buf) {
                    if (evs[i].events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) close(fd);
                    break;
                }
            }
        }
    }
}
