/* Instances of a slotted dataclass made and read in C, for the compiled ingest passes
   (otlp/_walk.pyx, write/_blocks.pyx, write/_strings.pyx).

   A 512 x 40 export makes ~20k SpanEvents and ~20k Blocks and reads each of their fields
   again later. Through the class, a dataclass's generated __init__ is a Python frame per
   object (~0.2-0.3 us), and every read looks the attribute up on the type first. Here an
   object is allocated by its type (tp_alloc: zeroed, tracked by the cyclic GC, exactly as
   object.__new__ makes it) and each field is stored at its slot's offset; a read is a load at
   that offset.

   Only for a class the Python side found plain (collector/_slotted.py, `fields_of`): a
   dataclass whose instance is its fields and nothing else, all of them object slots,
   without __post_init__, metaclass or __new__ of its own. For any other class the layout is
   not made and the callers go through the class as before. */

#ifndef PROMPTPRISM_SLOTTED_H
#define PROMPTPRISM_SLOTTED_H

#include <Python.h>
#include <structmember.h>

#define PROMPTPRISM_MAX_SLOTS 16

typedef struct {
    PyTypeObject* type;  /* NULL: not usable, go through the class; borrowed, the module keeps the class */
    Py_ssize_t count;
    Py_ssize_t offsets[PROMPTPRISM_MAX_SLOTS];
} promptprism_slotted;

/* The layout of `type` for the member descriptors in `descriptors` (a tuple, in the order values
   are given); 0 when every one is a writable object slot of `type` itself, else -1 and the
   layout stays unusable. No Python exception either way. */
static int promptprism_slotted_init(promptprism_slotted* layout, PyObject* type, PyObject* descriptors) {
    Py_ssize_t count, i;
    layout->type = NULL;
    layout->count = 0;
    if (!PyType_Check(type) || !PyTuple_Check(descriptors))
        return -1;
    count = PyTuple_GET_SIZE(descriptors);
    if (count > PROMPTPRISM_MAX_SLOTS)
        return -1;
    for (i = 0; i < count; i++) {
        PyObject* descriptor = PyTuple_GET_ITEM(descriptors, i);
        PyMemberDef* member;
        if (!Py_IS_TYPE(descriptor, &PyMemberDescr_Type)
                || ((PyDescrObject*)descriptor)->d_type != (PyTypeObject*)type)
            return -1;
        member = ((PyMemberDescrObject*)descriptor)->d_member;
        if (member->type != T_OBJECT_EX || (member->flags & READONLY)
                || member->offset < (Py_ssize_t)sizeof(PyObject)
                || member->offset + (Py_ssize_t)sizeof(PyObject*) > ((PyTypeObject*)type)->tp_basicsize)
            return -1;
        layout->offsets[i] = member->offset;
    }
    layout->count = count;
    layout->type = (PyTypeObject*)type;
    return 0;
}

/* A new instance holding `values` (new references taken), or NULL with an exception set. */
static PyObject* promptprism_slotted_new(const promptprism_slotted* layout, PyObject* const* values) {
    PyObject* made;
    Py_ssize_t i;
    made = layout->type->tp_alloc(layout->type, 0);
    if (made == NULL)
        return NULL;
    for (i = 0; i < layout->count; i++) {
        Py_INCREF(values[i]);
        *(PyObject**)((char*)made + layout->offsets[i]) = values[i];
    }
    return made;
}

/* Field `i` of an instance of the layout's own type: borrowed, NULL when it was never set. */
static inline PyObject* promptprism_slot(const promptprism_slotted* layout, PyObject* instance, Py_ssize_t i) {
    return *(PyObject**)((char*)instance + layout->offsets[i]);
}

#endif
