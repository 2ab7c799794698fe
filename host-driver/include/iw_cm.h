/*
 * iw_cm.h: the Linux kernel's iWARP connection manager API (include/rdma/iw_cm.h) over an
 * iwnic NIC, for C programs. Link with libiwnic_host_driver.a (plus -lpthread -ldl -lm)
 * or libiwnic_host_driver.so.
 *
 * Names, argument order and field widths are the kernel's; the semantics are the
 * contract in spec/iwcm.md (states, return values, event rules). Every call returns 0 or
 * a negative errno. Handlers run one at a time on the driver's dispatch thread and may
 * call the API (accepting from the CONNECT_REQUEST handler is the common case).
 *
 * Differences from the kernel, all small:
 * - struct ib_device is an iwnic device opened with iwnic_open_inprocess().
 * - struct ib_qp_attr holds only the two fields iw_cm reads and writes.
 * - iw_create_cm_id returns ERR_PTR(-errno) like the kernel; test it with
 *   iwnic_is_err() / iwnic_ptr_err().
 * - A handler that returns non-zero gets its id destroyed and freed by the driver
 *   (rule 7): do not destroy it yourself, and do not both destroy it and return non-zero.
 * - iw_destroy_cm_id called from the id's own handler returns at once; the id is freed
 *   and no later handler runs for it.
 * - iw_cm_disconnect called from a handler on an id whose accept returned but whose
 *   ESTABLISHED has not been delivered yet does not wait for it (the kernel would
 *   deadlock there): it returns 0 and the disconnect is sent when the ESTABLISHED is
 *   delivered, before that handler runs (abrupt if any of the calls asked for it);
 *   the application sees ESTABLISHED, then CLOSE. Nothing is sent if the id is
 *   destroyed first. Elsewhere it waits for the ESTABLISHED, as the kernel does.
 * - Private data: the C event carries at most 255 bytes (u8 length, as Linux); accept,
 *   connect and reject send up to 512.
 */
#ifndef IWNIC_IW_CM_H
#define IWNIC_IW_CM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#ifdef __cplusplus
extern "C" {
#endif

struct ib_device;
struct iwnic_nic;
struct iw_cm_id;
struct iw_cm_event;

enum iw_cm_event_type {
	IW_CM_EVENT_CONNECT_REQUEST = 1, /* connect request received */
	IW_CM_EVENT_CONNECT_REPLY,       /* reply from active connect request */
	IW_CM_EVENT_ESTABLISHED,         /* passive side accept successful */
	IW_CM_EVENT_DISCONNECT,          /* orderly shutdown (never reaches the application) */
	IW_CM_EVENT_CLOSE                /* connection closed: the id's last event */
};

struct iw_cm_event {
	enum iw_cm_event_type event;
	int status;                        /* 0 or a negative errno */
	struct sockaddr_storage local_addr;
	struct sockaddr_storage remote_addr;
	void *private_data;                /* valid during the handler call only */
	void *provider_data;               /* always NULL */
	uint8_t private_data_len;
	uint8_t ord;                       /* CONNECT_REPLY/ESTABLISHED: local IRD */
	uint8_t ird;                       /* CONNECT_REPLY/ESTABLISHED: local ORD */
	/* Not in the kernel's struct: CONNECT_REPLY 0 and ESTABLISHED in MPA peer-to-peer
	 * mode say which RTR began FPDU mode (IWNIC_RTR_*), else 0. The NIC sends the RTR,
	 * which the kernel's providers do themselves: an RTR Send or RDMA Read Request is
	 * message number 1 of its queue, so the connection's own start at 2. */
	uint8_t iwnic_rtr;
};

#define IWNIC_RTR_SEND  0x01 /* zero-length Send */
#define IWNIC_RTR_WRITE 0x02 /* zero-length RDMA Write */
#define IWNIC_RTR_READ  0x04 /* zero-length RDMA Read Request */

/* The application's event handler (manager -> application). */
typedef int (*iw_cm_handler)(struct iw_cm_id *cm_id, struct iw_cm_event *event);

/* The kernel's provider -> manager handler type. iwnic's provider is the NIC, whose
 * events arrive as host-interface records, so no C function of this type exists here;
 * the type is kept for code written against the kernel header. */
typedef int (*iw_event_handler)(struct iw_cm_id *cm_id, struct iw_cm_event *event);

struct iw_cm_id {
	iw_cm_handler cm_handler;          /* client callback function */
	void *context;                     /* client callback context */
	struct ib_device *device;
	struct sockaddr_storage local_addr;  /* set before listen (and optionally connect) */
	struct sockaddr_storage remote_addr; /* set before connect */
};

struct iw_cm_conn_param {
	const void *private_data;
	uint16_t private_data_len;
	uint32_t ord;
	uint32_t ird;
	uint32_t qpn;
};

enum ib_qp_state {
	IB_QPS_RESET,
	IB_QPS_INIT,
	IB_QPS_RTR,
	IB_QPS_RTS,
	IB_QPS_SQD,
	IB_QPS_SQE,
	IB_QPS_ERR
};

enum ib_qp_attr_mask {
	IB_QP_STATE = 1,
	IB_QP_ACCESS_FLAGS = (1 << 3)
};

enum ib_access_flags {
	IB_ACCESS_REMOTE_WRITE = (1 << 1),
	IB_ACCESS_REMOTE_READ = (1 << 2)
};

struct ib_qp_attr {
	enum ib_qp_state qp_state;
	int qp_access_flags;
};

struct iw_cm_id *iw_create_cm_id(struct ib_device *device, iw_cm_handler cm_handler,
				 void *context);
void iw_destroy_cm_id(struct iw_cm_id *cm_id);
int iw_cm_listen(struct iw_cm_id *cm_id, int backlog);
int iw_cm_accept(struct iw_cm_id *cm_id, struct iw_cm_conn_param *iw_param);
int iw_cm_reject(struct iw_cm_id *cm_id, const void *private_data, uint8_t private_data_len);
int iw_cm_connect(struct iw_cm_id *cm_id, struct iw_cm_conn_param *iw_param);
int iw_cm_disconnect(struct iw_cm_id *cm_id, int abrupt);
int iw_cm_init_qp_attr(struct iw_cm_id *cm_id, struct ib_qp_attr *qp_attr, int *qp_attr_mask);
const char *iwcm_reject_msg(int reason);

static inline int iwnic_is_err(const void *ptr)
{
	return (uintptr_t)ptr >= (uintptr_t)-4095;
}

static inline int iwnic_ptr_err(const void *ptr)
{
	return (int)(intptr_t)ptr;
}

/* Devices. */

/* Open a device over a new in-process link; the NIC end goes to *nic for a simulator.
 * host_queue_capacity: records the host queue holds (0: the default, 256). */
int iwnic_open_inprocess(unsigned int host_queue_capacity, struct ib_device **device,
			 struct iwnic_nic **nic);
/* Close a device (not from a handler); ids not destroyed are leaked. */
void iwnic_close(struct ib_device *device);
/* Make a QP number known to accept and connect (an unknown one gives -EINVAL). */
void iwnic_register_qp(struct ib_device *device, uint32_t qpn);

/* The NIC end of an in-process link, for a simulator (records as in iwnic_proto::host). */

/* Wait up to timeout_ms for the next command record: its length, 0 on timeout,
 * -ENODEV once the link is closed, -EMSGSIZE if buf is too small. */
long iwnic_nic_wait_command(struct iwnic_nic *nic, void *buf, size_t len,
			    unsigned int timeout_ms);
/* Records the host queue can take now. */
size_t iwnic_nic_host_space(const struct iwnic_nic *nic);
/* Queue a completion or event record for the host. */
void iwnic_nic_push_record(const struct iwnic_nic *nic, const void *record, size_t len);
void iwnic_nic_free(struct iwnic_nic *nic);

#ifdef __cplusplus
}
#endif

#endif /* IWNIC_IW_CM_H */
