/*
 * A scripted NIC for examples/c/listen_accept.c, speaking the host-interface records of
 * iwnic_proto::host the way the firmware does: Listen completes with a listener handle,
 * then a peer's CONNECT_REQUEST arrives; Accept completes and ESTABLISHED follows; then
 * the peer closes (DISCONNECT, CLOSE). Every other command completes with status 0.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "iw_cm.h"

enum { LISTENER = 0x10001, CONN = 0x10002 };

static struct iwnic_nic *the_nic;
static uint32_t next_seq = 1;

static void put16(uint8_t *p, uint16_t v) { p[0] = v; p[1] = v >> 8; }
static void put32(uint8_t *p, uint32_t v) { put16(p, v); put16(p + 2, v >> 16); }
static uint32_t get32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

static void complete(uint32_t tag, int32_t status, uint32_t handle)
{
	uint8_t r[16] = { 0x40 };

	put16(r + 2, sizeof(r));
	put32(r + 4, tag);
	put32(r + 8, handle);
	put32(r + 12, (uint32_t)status);
	iwnic_nic_push_record(the_nic, r, sizeof(r));
}

static void endpoint(uint8_t *p, const uint8_t ip[4], uint16_t port)
{
	p[0] = 4;
	put16(p + 2, port);
	memcpy(p + 4, ip, 4);
}

static void event(int kind, uint32_t listener, int32_t status, uint16_t ird, uint16_t ord,
		  const char *private_data)
{
	static const uint8_t local[4] = { 10, 0, 0, 1 }, peer[4] = { 10, 0, 0, 2 };
	uint8_t r[68 + 64] = { 0 };
	size_t pd_len = strlen(private_data);

	r[0] = 0x80 | kind;
	put16(r + 2, 68 + pd_len);
	put32(r + 4, next_seq++);
	put32(r + 8, CONN);
	put32(r + 12, listener);
	put32(r + 16, (uint32_t)status);
	put16(r + 20, ird);
	put16(r + 22, ord);
	endpoint(r + 24, local, 4791);
	endpoint(r + 44, peer, 50000);
	put16(r + 64, pd_len);
	memcpy(r + 68, private_data, pd_len);
	iwnic_nic_push_record(the_nic, r, 68 + pd_len);
}

static void *serve(void *unused)
{
	uint8_t cmd[64 + 512];
	long len;

	(void)unused;
	while ((len = iwnic_nic_wait_command(the_nic, cmd, sizeof(cmd), 1000)) >= 0) {
		if (len == 0)
			continue;
		uint32_t tag = get32(cmd + 4);

		switch (cmd[0]) {
		case 1: /* Listen */
			complete(tag, 0, LISTENER);
			event(1, LISTENER, 0, 5, 6, "hello");
			break;
		case 4: /* Accept: the connection is established (peer-to-peer RTR seen) */
			complete(tag, 0, CONN);
			event(3, 0, 0, cmd[12], cmd[14], "");
			event(4, 0, 0, 0, 0, ""); /* the peer's FIN */
			event(5, 0, 0, 0, 0, "");
			break;
		default:
			complete(tag, 0, 0);
		}
	}
	iwnic_nic_free(the_nic); /* the device closed the link */
	return NULL;
}

int nic_simulator_attach(struct iwnic_nic *nic)
{
	pthread_t thread;

	the_nic = nic;
	if (pthread_create(&thread, NULL, serve, NULL))
		return -1;
	return pthread_detach(thread);
}
