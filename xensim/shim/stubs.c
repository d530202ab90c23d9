/*
 * libxen calls that PV backends or xenstored import but xensim does not
 * support (foreign memory, ioreq servers, HVM params): each fails with
 * ENOSYS and logs once (see shim_enosys()).
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * This file deliberately does not include the libxen headers: every stub
 * ignores its arguments and only returns -1 or NULL, which is
 * ABI-compatible on the SysV x86-64 (and i386 cdecl) calling convention
 * with the real prototypes, where the caller owns its arguments. The
 * exported names and versions are in libxensim-shim.map.
 */
#include <stddef.h>

#include "shim-int.h"

#define STUB_INT(name)                      \
    int name(void);                         \
    int name(void)                          \
    {                                       \
        return SHIM_ENOSYS(#name);          \
    }

#define STUB_PTR(name)                      \
    void *name(void);                       \
    void *name(void)                        \
    {                                       \
        SHIM_ENOSYS(#name);                 \
        return NULL;                        \
    }

/* libxenforeignmemory: guest memory is reached through grants only. */
STUB_PTR(xenforeignmemory_map)
STUB_PTR(xenforeignmemory_map2)
STUB_INT(xenforeignmemory_unmap)
STUB_INT(xenforeignmemory_restrict)
STUB_PTR(xenforeignmemory_map_resource)
STUB_INT(xenforeignmemory_unmap_resource)
STUB_INT(xenforeignmemory_resource_size)

/* libxendevicemodel: HVM device model calls, no HVM guests here. */
STUB_INT(xendevicemodel_create_ioreq_server)
STUB_INT(xendevicemodel_get_ioreq_server_info)
STUB_INT(xendevicemodel_map_io_range_to_ioreq_server)
STUB_INT(xendevicemodel_unmap_io_range_from_ioreq_server)
STUB_INT(xendevicemodel_map_mem_type_to_ioreq_server)
STUB_INT(xendevicemodel_map_pcidev_to_ioreq_server)
STUB_INT(xendevicemodel_unmap_pcidev_from_ioreq_server)
STUB_INT(xendevicemodel_destroy_ioreq_server)
STUB_INT(xendevicemodel_set_ioreq_server_state)
STUB_INT(xendevicemodel_set_pci_intx_level)
STUB_INT(xendevicemodel_set_isa_irq_level)
STUB_INT(xendevicemodel_set_irq_level)
STUB_INT(xendevicemodel_set_pci_link_route)
STUB_INT(xendevicemodel_inject_msi)
STUB_INT(xendevicemodel_track_dirty_vram)
STUB_INT(xendevicemodel_modified_memory)
STUB_INT(xendevicemodel_modified_memory_bulk)
STUB_INT(xendevicemodel_set_mem_type)
STUB_INT(xendevicemodel_inject_event)
STUB_INT(xendevicemodel_shutdown)
STUB_INT(xendevicemodel_relocate_memory)
STUB_INT(xendevicemodel_pin_memory_cacheattr)
STUB_INT(xendevicemodel_nr_vcpus)
STUB_INT(xendevicemodel_restrict)

/* libxengnttab: grant sharing from dom0 and dma-bufs. */
STUB_INT(xengnttab_fd)
STUB_INT(xengnttab_dmabuf_exp_from_refs)
STUB_INT(xengnttab_dmabuf_exp_wait_released)
STUB_INT(xengnttab_dmabuf_imp_to_refs)
STUB_INT(xengnttab_dmabuf_imp_release)
STUB_PTR(xengntshr_open)
STUB_INT(xengntshr_close)
STUB_INT(xengntshr_fd)
STUB_PTR(xengntshr_share_pages)
STUB_PTR(xengntshr_share_page_notify)
STUB_INT(xengntshr_unshare)

/* libxenctrl: only what QEMU imports (the library has ~400 calls). */
STUB_INT(xc_domain_populate_physmap_exact)
STUB_INT(xc_domain_shutdown)
STUB_INT(xc_get_hvm_param)
STUB_INT(xc_set_hvm_param)
