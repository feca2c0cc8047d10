/*
 * tests/unit/test_rules.c - the rules-file parser and matcher, including
 * hostile input: overlong lines, NUL bytes, huge numbers, junk.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../config/xs_config.h"
#include "xt.h"

static char err[XS_CFG_ERR_MAX];

static int parse(struct xs_rules *r, const char *text)
{
	err[0] = '\0';
	return xs_rules_parse(r, "t.rules", text, strlen(text), err,
			      sizeof(err));
}

/* Parse @text, expect failure with @msg in the error. */
static void expect_error(const char *text, const char *msg)
{
	struct xs_rules r = { 0 };
	int rc = parse(&r, text);

	if (rc == 0)
		xt_fail(__FILE__, __LINE__, "\"%s\" parsed, expected \"%s\"",
			text, msg);
	XT_ASSERT_CONTAINS(err, msg);
	XT_ASSERT_EQ(r.nr_rules, 0);
	XT_ASSERT(r.rules == NULL);
}

static struct sockaddr_storage v4(const char *ip, int port)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

	sin->sin_family = AF_INET;
	sin->sin_port = htons((uint16_t)port);
	inet_pton(AF_INET, ip, &sin->sin_addr);
	return ss;
}

static struct sockaddr_storage v6(const char *ip, int port)
{
	struct sockaddr_storage ss = { 0 };
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

	sin6->sin6_family = AF_INET6;
	sin6->sin6_port = htons((uint16_t)port);
	inet_pton(AF_INET6, ip, &sin6->sin6_addr);
	return ss;
}

static enum xs_rule_action match(const struct xs_rules *r, const char *prog,
				 enum xs_role role, struct sockaddr_storage ss,
				 unsigned int *line)
{
	return xs_rules_match(r, prog, role, (struct sockaddr *)&ss, sizeof(ss),
			      line);
}

XT_TEST(empty_and_comments)
{
	struct xs_rules r = { 0 };

	XT_ASSERT_EQ(parse(&r, ""), 0);
	XT_ASSERT_EQ(r.nr_rules, 0);
	XT_ASSERT_EQ(parse(&r, "# only a comment\n\n   \t\n# more\n"), 0);
	XT_ASSERT_EQ(r.nr_rules, 0);
	XT_ASSERT_EQ(match(&r, "x", XS_ROLE_CLIENT, v4("10.0.0.1", 80), NULL),
		     XS_ACTION_NONE);
}

XT_TEST(fields_parsed)
{
	struct xs_rules r = { 0 };
	const char *text = "tcp  sshd   server  *:22   # ssh stays on TCP\r\n"
			   "rdma redis-* client 10.1.0.0/16:6379-6380\n"
			   "tcp * * [fe80::]/10:*\n"
			   "set XSOCK_SPIN_US 20\n";

	XT_ASSERT_EQ(parse(&r, text), 0);
	XT_ASSERT_EQ(r.nr_rules, 3);
	XT_ASSERT_EQ(r.nr_sets, 1);
	XT_ASSERT_EQ(r.rules[0].action, XS_ACTION_TCP);
	XT_ASSERT_STREQ(r.rules[0].program, "sshd");
	XT_ASSERT_EQ(r.rules[0].role, XS_ROLE_SERVER);
	XT_ASSERT_EQ(r.rules[0].family, AF_UNSPEC);
	XT_ASSERT_EQ(r.rules[0].port_lo, 22);
	XT_ASSERT_EQ(r.rules[0].port_hi, 22);
	XT_ASSERT_EQ(r.rules[0].line, 1);
	XT_ASSERT_EQ(r.rules[1].action, XS_ACTION_RDMA);
	XT_ASSERT_EQ(r.rules[1].family, AF_INET);
	XT_ASSERT_EQ(r.rules[1].prefix, 16);
	XT_ASSERT_EQ(r.rules[1].port_lo, 6379);
	XT_ASSERT_EQ(r.rules[1].port_hi, 6380);
	XT_ASSERT_EQ(r.rules[2].family, AF_INET6);
	XT_ASSERT_EQ(r.rules[2].prefix, 10);
	XT_ASSERT_EQ(r.rules[2].port_lo, 0);
	XT_ASSERT_EQ(r.rules[2].port_hi, 65535);
	XT_ASSERT_STREQ(r.sets[0].name, "XSOCK_SPIN_US");
	XT_ASSERT_STREQ(r.sets[0].value, "20");
	XT_ASSERT_EQ(r.sets[0].line, 4);
	xs_rules_free(&r);
	XT_ASSERT_EQ(r.nr_rules, 0);
}

XT_TEST(first_match_wins)
{
	struct xs_rules r = { 0 };
	unsigned int line;

	XT_ASSERT_EQ(parse(&r, "tcp * client 10.0.0.5:80\n"
			       "rdma * client 10.0.0.0/8:*\n"
			       "tcp * * *:*\n"),
		     0);
	XT_ASSERT_EQ(match(&r, "a", XS_ROLE_CLIENT, v4("10.0.0.5", 80), &line),
		     XS_ACTION_TCP);
	XT_ASSERT_EQ(line, 1);
	XT_ASSERT_EQ(match(&r, "a", XS_ROLE_CLIENT, v4("10.0.0.5", 81), &line),
		     XS_ACTION_RDMA);
	XT_ASSERT_EQ(line, 2);
	XT_ASSERT_EQ(match(&r, "a", XS_ROLE_CLIENT, v4("11.0.0.5", 81), &line),
		     XS_ACTION_TCP);
	XT_ASSERT_EQ(line, 3);
	xs_rules_free(&r);
}

XT_TEST(role_program_port)
{
	struct xs_rules r = { 0 };

	XT_ASSERT_EQ(parse(&r, "rdma redis-* server *:6379\n"
			       "tcp * * *:*\n"),
		     0);
	XT_ASSERT_EQ(match(&r, "redis-server", XS_ROLE_SERVER,
			   v4("0.0.0.0", 6379), NULL),
		     XS_ACTION_RDMA);
	/* role and program must both match */
	XT_ASSERT_EQ(match(&r, "redis-server", XS_ROLE_CLIENT,
			   v4("0.0.0.0", 6379), NULL),
		     XS_ACTION_TCP);
	XT_ASSERT_EQ(match(&r, "memcached", XS_ROLE_SERVER, v4("0.0.0.0", 6379),
			   NULL),
		     XS_ACTION_TCP);
	XT_ASSERT_EQ(match(&r, "redis-server", XS_ROLE_SERVER,
			   v4("0.0.0.0", 6380), NULL),
		     XS_ACTION_TCP);
	xs_rules_free(&r);
}

XT_TEST(prefixes)
{
	struct xs_rules r = { 0 };

	XT_ASSERT_EQ(parse(&r, "tcp * * 192.168.1.0/25:*\n"
			       "tcp * * 0.0.0.0/0:1\n"
			       "tcp * * [2001:db8::]/33:*\n"),
		     0);
	XT_ASSERT_EQ(
		match(&r, "p", XS_ROLE_CLIENT, v4("192.168.1.127", 9), NULL),
		XS_ACTION_TCP);
	XT_ASSERT_EQ(
		match(&r, "p", XS_ROLE_CLIENT, v4("192.168.1.128", 9), NULL),
		XS_ACTION_NONE);
	XT_ASSERT_EQ(match(&r, "p", XS_ROLE_CLIENT, v4("8.8.8.8", 1), NULL),
		     XS_ACTION_TCP);
	XT_ASSERT_EQ(
		match(&r, "p", XS_ROLE_CLIENT, v6("2001:db8:7fff::1", 9), NULL),
		XS_ACTION_TCP);
	XT_ASSERT_EQ(
		match(&r, "p", XS_ROLE_CLIENT, v6("2001:db8:8000::1", 9), NULL),
		XS_ACTION_NONE);
	/* an IPv4-mapped IPv6 address matches IPv4 rules */
	XT_ASSERT_EQ(match(&r, "p", XS_ROLE_CLIENT, v6("::ffff:192.168.1.1", 9),
			   NULL),
		     XS_ACTION_TCP);
	/* IPv4 rules never match a native IPv6 address */
	XT_ASSERT_EQ(match(&r, "p", XS_ROLE_CLIENT, v6("::1", 1), NULL),
		     XS_ACTION_NONE);
	xs_rules_free(&r);
}

XT_TEST(non_inet_address_never_matches)
{
	struct xs_rules r = { 0 };
	struct sockaddr_storage ss = { 0 };

	XT_ASSERT_EQ(parse(&r, "tcp * * *:*\n"), 0);
	ss.ss_family = AF_UNIX;
	XT_ASSERT_EQ(xs_rules_match(&r, "p", XS_ROLE_CLIENT,
				    (struct sockaddr *)&ss, sizeof(ss), NULL),
		     XS_ACTION_NONE);
	/* a truncated AF_INET address is not read past its length */
	ss = v4("1.2.3.4", 5);
	XT_ASSERT_EQ(xs_rules_match(&r, "p", XS_ROLE_CLIENT,
				    (struct sockaddr *)&ss, 4, NULL),
		     XS_ACTION_NONE);
	XT_ASSERT_EQ(xs_rules_match(&r, "p", XS_ROLE_CLIENT, NULL, 0, NULL),
		     XS_ACTION_NONE);
	xs_rules_free(&r);
}

XT_TEST(syntax_errors_name_line_and_column)
{
	expect_error("bogus * * *:*\n", "t.rules:1:1: unknown directive "
					"'bogus' (expected rdma, tcp or set)");
	expect_error("\n\ntcp\n", "t.rules:3:4: missing PROGRAM field");
	expect_error("tcp prog\n", "missing ROLE field");
	expect_error("tcp prog server\n", "missing ADDRESS:PORT field");
	expect_error("tcp * master *:*\n",
		     "t.rules:1:7: unknown role 'master'");
	expect_error("tcp * * 10.0.0.1\n", "expected ADDRESS:PORT");
	expect_error("tcp * * 10.0.0.256:1\n", "bad IPv4 address '10.0.0.256'");
	expect_error("tcp * * 10.0.0.0/33:1\n",
		     "t.rules:1:18: bad prefix length (0-32)");
	expect_error("tcp * * [::1]/129:1\n", "bad prefix length (0-128)");
	expect_error("tcp * * [::1:1\n", "missing ']'");
	expect_error("tcp * * [zz::1]:1\n", "bad IPv6 address");
	expect_error("tcp * * *:65536\n", "bad port '65536'");
	expect_error("tcp * * *:-1\n", "bad port range");
	expect_error("tcp * * *:80-79\n", "reversed");
	expect_error("tcp * * */8:80\n", "'*' takes no prefix");
	expect_error("tcp * * *:80 extra\n",
		     "t.rules:1:14: unexpected 'extra'");
	expect_error("set\n", "'set' needs a XSOCK_* name");
	expect_error("set PATH /bin\n", "'PATH' is not a XSOCK_* name");
	expect_error("set XSOCK_SPIN_US\n", "needs a value");
	expect_error("set XSOCK_SPIN_US 1 2\n", "unexpected '2' after value");
}

XT_TEST(huge_numbers)
{
	expect_error("tcp * * *:99999999999999999999\n", "bad port");
	expect_error("tcp * * *:4294967296\n", "bad port");
	expect_error("tcp * * 1.2.3.4/4294967297:1\n", "bad prefix length");
	expect_error("tcp * * 1.2.3.4/99999999999999999999:1\n",
		     "bad prefix length");
}

XT_TEST(nul_byte_rejected)
{
	static const char text[] = "tcp * * *:1\ntcp *\0 * *:2\n";
	struct xs_rules r = { 0 };

	XT_ASSERT_EQ(xs_rules_parse(&r, "t.rules", text, sizeof(text) - 1, err,
				    sizeof(err)),
		     -EINVAL);
	XT_ASSERT_CONTAINS(err, "t.rules:2:6: NUL byte in line");
	XT_ASSERT_EQ(r.nr_rules, 0);
}

XT_TEST(overlong_line_rejected)
{
	size_t n = XS_RULES_LINE_MAX + 1;
	char *text = malloc(n + 2);
	struct xs_rules r = { 0 };

	XT_ASSERT(text != NULL);
	memset(text, '#', n);
	text[n] = '\n';
	text[n + 1] = '\0';
	XT_ASSERT_EQ(parse(&r, text), -EINVAL);
	XT_ASSERT_CONTAINS(err, "line longer than 1024 bytes");
	/* exactly the limit is fine */
	text[n - 1] = '\n';
	text[n] = '\0';
	XT_ASSERT_EQ(parse(&r, text), 0);
	free(text);
}

XT_TEST(long_program_pattern_rejected)
{
	char text[512];

	snprintf(text, sizeof(text), "tcp %0200d * *:*\n", 7);
	expect_error(text, "program pattern longer than 127 bytes");
}

XT_TEST(too_many_directives)
{
	size_t n = XS_RULES_MAX + 1, i;
	char *text = malloc(n * 20 + 1), *p = text;
	struct xs_rules r = { 0 };

	XT_ASSERT(text != NULL);
	for (i = 0; i < n; i++)
		p += sprintf(p, "tcp * * *:%u\n", (unsigned int)(i % 60000));
	XT_ASSERT_EQ(parse(&r, text), -E2BIG);
	XT_ASSERT_CONTAINS(err, "more than 4096 directives");
	XT_ASSERT_EQ(r.nr_rules, 0);
	/* exactly the limit parses, and every rule is kept */
	text[strlen(text) - strlen(strrchr(text, 't'))] = '\0';
	XT_ASSERT_EQ(parse(&r, text), 0);
	XT_ASSERT_EQ(r.nr_rules, XS_RULES_MAX);
	XT_ASSERT_EQ(r.rules[XS_RULES_MAX - 1].port_lo,
		     (XS_RULES_MAX - 1) % 60000);
	xs_rules_free(&r);
	free(text);
}

XT_TEST(failed_parse_keeps_nothing)
{
	struct xs_rules r = { 0 };

	XT_ASSERT_EQ(parse(&r, "tcp * * *:1\n"), 0);
	XT_ASSERT_EQ(r.nr_rules, 1);
	/* a second, bad parse leaves an empty set, not a half-applied one */
	XT_ASSERT_EQ(parse(&r, "tcp * * *:1\nrdma * * *:2\nnope\n"), -EINVAL);
	XT_ASSERT_EQ(r.nr_rules, 0);
	XT_ASSERT(r.rules == NULL && r.sets == NULL);
}

XT_TEST(load_missing_file_and_directory)
{
	struct xs_rules r = { 0 };

	XT_ASSERT_EQ(
		xs_rules_load(&r, "/nonexistent/xsock.rules", err, sizeof(err)),
		-ENOENT);
	XT_ASSERT_CONTAINS(err,
			   "/nonexistent/xsock.rules: cannot open rules file");
	XT_ASSERT_EQ(xs_rules_load(&r, "/", err, sizeof(err)), -EISDIR);
	XT_ASSERT_CONTAINS(err, "is a directory");
}

XT_TEST(shipped_rules_file_parses)
{
	struct xs_rules r = { 0 };
	unsigned int line;

	XT_ASSERT_EQ(xs_rules_load(&r, XS_SRCDIR "/config/xsock.rules", err,
				   sizeof(err)),
		     0);
	XT_ASSERT(r.nr_rules > 0);
	/* ssh stays on kernel TCP */
	XT_ASSERT_EQ(
		match(&r, "ssh", XS_ROLE_CLIENT, v4("10.0.0.1", 22), &line),
		XS_ACTION_TCP);
	xs_rules_free(&r);
}

XT_TEST(ipv4_mapped_rule_matches_ipv4_sockets)
{
	struct xs_rules r = { 0 };

	XT_ASSERT_EQ(parse(&r, "tcp * client [::ffff:127.0.0.1]/128:*\n"
			       "tcp * client [::ffff:10.0.0.0]/104:*\n"),
		     0);
	XT_ASSERT_EQ(r.rules[0].family, AF_INET);
	XT_ASSERT_EQ(r.rules[0].prefix, 32);
	XT_ASSERT_EQ(r.rules[1].prefix, 8);
	XT_ASSERT_EQ(
		match(&r, "p", XS_ROLE_CLIENT, v6("::ffff:127.0.0.1", 9), NULL),
		XS_ACTION_TCP);
	XT_ASSERT_EQ(match(&r, "p", XS_ROLE_CLIENT, v4("127.0.0.1", 9), NULL),
		     XS_ACTION_TCP);
	XT_ASSERT_EQ(match(&r, "p", XS_ROLE_CLIENT, v4("10.9.9.9", 9), NULL),
		     XS_ACTION_TCP);
	XT_ASSERT_EQ(match(&r, "p", XS_ROLE_CLIENT, v4("11.0.0.1", 9), NULL),
		     XS_ACTION_NONE);
	xs_rules_free(&r);
}

XT_TEST(fifo_and_devices_are_refused_without_blocking)
{
	char path[] = "/tmp/xs_test_fifo.XXXXXX";
	struct xs_rules r = { 0 };
	int fd = mkstemp(path);

	XT_ASSERT(fd >= 0);
	close(fd);
	unlink(path);
	XT_ASSERT_EQ(mkfifo(path, 0600), 0);
	/* no writer: a blocking open would hang here (the harness times out) */
	XT_ASSERT_EQ(xs_rules_load(&r, path, err, sizeof(err)), -ENXIO);
	XT_ASSERT_CONTAINS(err, "not a regular file");
	unlink(path);
	XT_ASSERT_EQ(xs_rules_load(&r, "/dev/zero", err, sizeof(err)), -ENXIO);
	XT_ASSERT_CONTAINS(err, "/dev/zero: not a regular file");
}
