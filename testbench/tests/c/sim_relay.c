/*
 * nic_simulator_attach() for examples/c/listen_accept.c that puts a simulated iwnic NIC
 * (testbench's Sim, run by the test that starts this program) on the far end of the
 * in-process link: host-interface records are relayed, unchanged, over the Unix socket
 * named by IWNIC_SIM_SOCKET, each as a 4-byte little-endian length and the record.
 * Commands go from the link to the socket, completions and events from the socket to
 * the link, waiting for room in the host queue as the NIC itself does.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "iw_cm.h"

/* Records never exceed this (iwnic_proto::host::MAX_RECORD_LEN is below it). */
#define MAX_RECORD 1024

static struct iwnic_nic *the_nic;
static int the_socket = -1;
static pthread_t records_thread;

static int transfer(int fd, void *buf, size_t len, int writing)
{
	uint8_t *p = buf;

	while (len > 0) {
		ssize_t n = writing ? write(fd, p, len) : read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Socket to link: completions and events from the simulated NIC. */
static void *relay_records(void *unused)
{
	uint8_t record[MAX_RECORD];
	uint8_t header[4];

	(void)unused;
	while (transfer(the_socket, header, sizeof(header), 0) == 0) {
		uint32_t len = header[0] | header[1] << 8 | header[2] << 16 | (uint32_t)header[3] << 24;
		const struct timespec pause = { 0, 100000 };

		if (len > sizeof(record) || transfer(the_socket, record, len, 0))
			break;
		while (iwnic_nic_host_space(the_nic) == 0)
			nanosleep(&pause, NULL);
		iwnic_nic_push_record(the_nic, record, len);
	}
	return NULL;
}

/* Link to socket: commands from the driver. Ends when the device closes the link. */
static void *relay_commands(void *unused)
{
	uint8_t frame[4 + MAX_RECORD];
	long len;

	(void)unused;
	while ((len = iwnic_nic_wait_command(the_nic, frame + 4, MAX_RECORD, 100)) >= 0) {
		if (len == 0)
			continue;
		frame[0] = len;
		frame[1] = len >> 8;
		frame[2] = len >> 16;
		frame[3] = len >> 24;
		if (transfer(the_socket, frame, 4 + (size_t)len, 1))
			break;
	}
	shutdown(the_socket, SHUT_RDWR); /* ends relay_records too */
	pthread_join(records_thread, NULL);
	close(the_socket);
	iwnic_nic_free(the_nic);
	return NULL;
}

int nic_simulator_attach(struct iwnic_nic *nic)
{
	const char *path = getenv("IWNIC_SIM_SOCKET");
	struct sockaddr_un sim = { .sun_family = AF_UNIX };
	pthread_t commands_thread;

	if (!path || strlen(path) >= sizeof(sim.sun_path)) {
		fprintf(stderr, "IWNIC_SIM_SOCKET must name the simulator's socket\n");
		return -1;
	}
	strcpy(sim.sun_path, path);
	the_socket = socket(AF_UNIX, SOCK_STREAM, 0);
	if (the_socket < 0 || connect(the_socket, (struct sockaddr *)&sim, sizeof(sim))) {
		perror("connect to the simulator");
		return -1;
	}
	the_nic = nic;
	if (pthread_create(&records_thread, NULL, relay_records, NULL))
		return -1;
	if (pthread_create(&commands_thread, NULL, relay_commands, NULL))
		return -1;
	return pthread_detach(commands_thread);
}
