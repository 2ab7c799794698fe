/*
 * listen_accept: listen on port 4791, accept every connection from the CONNECT_REQUEST
 * handler, print every event, and stop after the first connection closes.
 *
 * The NIC is whatever drives the other end of the in-process link: link in a simulator
 * that defines nic_simulator_attach() (the tests link a scripted one,
 * tests/c/scripted_nic.c). Build:
 *   cc -Iinclude examples/c/listen_accept.c SIMULATOR.c libiwnic_host_driver.a \
 *      -lpthread -ldl -lm
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "iw_cm.h"

/* Provided by the simulated NIC linked with this program: start serving `nic`. */
int nic_simulator_attach(struct iwnic_nic *nic);

#define QPN 1

struct app {
	pthread_mutex_t lock;
	pthread_cond_t closed_cond;
	int closed;
	struct iw_cm_id *conn;
};

static const char *event_name(enum iw_cm_event_type type)
{
	switch (type) {
	case IW_CM_EVENT_CONNECT_REQUEST: return "CONNECT_REQUEST";
	case IW_CM_EVENT_CONNECT_REPLY: return "CONNECT_REPLY";
	case IW_CM_EVENT_ESTABLISHED: return "ESTABLISHED";
	case IW_CM_EVENT_DISCONNECT: return "DISCONNECT";
	case IW_CM_EVENT_CLOSE: return "CLOSE";
	}
	return "?";
}

static void print_event(const struct iw_cm_event *event)
{
	const struct sockaddr_in *remote = (const struct sockaddr_in *)&event->remote_addr;
	char ip[INET_ADDRSTRLEN] = "?";

	if (remote->sin_family == AF_INET)
		inet_ntop(AF_INET, &remote->sin_addr, ip, sizeof(ip));
	printf("event %s status %d remote %s:%u ird %u ord %u rtr %u private_data \"%.*s\"\n",
	       event_name(event->event), event->status, ip, ntohs(remote->sin_port),
	       event->ird, event->ord, event->iwnic_rtr, event->private_data_len,
	       event->private_data ? (const char *)event->private_data : "");
}

static int handler(struct iw_cm_id *cm_id, struct iw_cm_event *event)
{
	struct app *app = cm_id->context;

	print_event(event);
	switch (event->event) {
	case IW_CM_EVENT_CONNECT_REQUEST: {
		/* cm_id is the new connection's id; accepting here is safe. */
		static const char reply[] = "welcome";
		struct iw_cm_conn_param param = {
			.private_data = reply,
			.private_data_len = sizeof(reply) - 1,
			.ord = 1,
			.ird = 1,
			.qpn = QPN,
		};
		int ret = iw_cm_accept(cm_id, &param);

		printf("accept: %d\n", ret);
		if (ret)
			return 0; /* a failed accept leaves the id IDLE; it is destroyed below */
		pthread_mutex_lock(&app->lock);
		app->conn = cm_id;
		pthread_mutex_unlock(&app->lock);
		return 0;
	}
	case IW_CM_EVENT_CLOSE:
		pthread_mutex_lock(&app->lock);
		app->closed = 1;
		pthread_cond_signal(&app->closed_cond);
		pthread_mutex_unlock(&app->lock);
		return 0;
	default:
		return 0;
	}
}

int main(void)
{
	struct app app = {
		.lock = PTHREAD_MUTEX_INITIALIZER,
		.closed_cond = PTHREAD_COND_INITIALIZER,
	};
	struct ib_device *device;
	struct iwnic_nic *nic;
	struct iw_cm_id *listener;
	struct sockaddr_in *local;
	int ret;

	ret = iwnic_open_inprocess(0, &device, &nic);
	if (ret) {
		fprintf(stderr, "iwnic_open_inprocess: %d\n", ret);
		return 1;
	}
	iwnic_register_qp(device, QPN);
	if (nic_simulator_attach(nic)) {
		fprintf(stderr, "no NIC simulator\n");
		return 1;
	}

	listener = iw_create_cm_id(device, handler, &app);
	if (iwnic_is_err(listener)) {
		fprintf(stderr, "iw_create_cm_id: %d\n", iwnic_ptr_err(listener));
		return 1;
	}
	local = (struct sockaddr_in *)&listener->local_addr;
	local->sin_family = AF_INET;
	local->sin_port = htons(4791);
	local->sin_addr.s_addr = htonl(INADDR_ANY);
	ret = iw_cm_listen(listener, 16);
	printf("listen: %d\n", ret);
	if (ret)
		return 1;
	printf("second listen: %d\n", iw_cm_listen(listener, 16));

	pthread_mutex_lock(&app.lock);
	while (!app.closed)
		pthread_cond_wait(&app.closed_cond, &app.lock);
	pthread_mutex_unlock(&app.lock);

	iw_destroy_cm_id(app.conn);
	iw_destroy_cm_id(listener);
	iwnic_close(device); /* the simulator sees its link close and frees the NIC end */
	printf("reject message for -ECONNREFUSED: %s\n", iwcm_reject_msg(-111));
	printf("done\n");
	return 0;
}
