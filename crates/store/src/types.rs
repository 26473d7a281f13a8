//! The values that cross the [`crate::Store`] interface.

use bytes::Bytes;

/// A position in the store's global history. Revision 0 is the empty store; the first write is 1.
pub type Revision = u64;

/// One key and its current value, with the revisions that created and last modified it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// The value bytes (oxplane stores JSON, but the store does not care).
    pub value: Bytes,
    /// Revision of the write that created this incarnation of the key.
    pub create_revision: Revision,
    /// Revision of the write that produced this value.
    pub mod_revision: Revision,
}

/// The answer to a [`crate::Store::get`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GetResponse {
    /// The key's value, if it exists.
    pub kv: Option<KeyValue>,
    /// The revision the read was made at.
    pub revision: Revision,
}

/// A read of every live key under a prefix.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeRequest {
    /// Keys starting with this prefix are returned ("" means every key).
    pub prefix: String,
    /// At most this many keys; 0 means no limit.
    pub limit: usize,
    /// A token from a previous response, to continue that read at the same revision.
    pub continue_token: Option<String>,
    /// Read the snapshot at this revision instead of the latest one.
    pub revision: Option<Revision>,
}

/// The answer to a [`crate::Store::range`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RangeResponse {
    /// The keys found, in key order.
    pub kvs: Vec<KeyValue>,
    /// The revision of the snapshot that was read.
    pub revision: Revision,
    /// Present when more keys remain; pass it back to read the next page of the same snapshot.
    pub continue_token: Option<String>,
}

/// A conditional write: the condition is checked and the write applied atomically.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    /// Create the key; rejected if it exists.
    Create {
        /// The key.
        key: String,
        /// The new value.
        value: Bytes,
    },
    /// Replace the value; rejected unless the key exists with this mod revision.
    Update {
        /// The key.
        key: String,
        /// The new value.
        value: Bytes,
        /// The mod revision the caller read.
        expected: Revision,
    },
    /// Delete the key; rejected unless the key exists with this mod revision.
    Delete {
        /// The key.
        key: String,
        /// The mod revision the caller read.
        expected: Revision,
    },
}

impl Write {
    /// The key this write touches.
    pub fn key(&self) -> &str {
        match self {
            Write::Create { key, .. } | Write::Update { key, .. } | Write::Delete { key, .. } => {
                key
            }
        }
    }
}

/// The outcome of a [`Write`] that reached the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WriteResult {
    /// The write is durable; the event is the change it made.
    Committed(Event),
    /// The condition did not hold; nothing was written. `current` is the key's value now.
    Rejected {
        /// The key's current value, if it exists.
        current: Option<KeyValue>,
    },
}

/// One committed change, as delivered by watches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A key was created (`prev` is `None`) or updated (`prev` is the value it replaced).
    Put {
        /// The new value.
        kv: KeyValue,
        /// The value before this write, if the key existed.
        prev: Option<KeyValue>,
    },
    /// A key was deleted.
    Delete {
        /// The revision of the delete.
        revision: Revision,
        /// The value that was deleted.
        prev: KeyValue,
    },
}

impl Event {
    /// The revision this change was committed at.
    pub fn revision(&self) -> Revision {
        match self {
            Event::Put { kv, .. } => kv.mod_revision,
            Event::Delete { revision, .. } => *revision,
        }
    }

    /// The key that changed.
    pub fn key(&self) -> &str {
        match self {
            Event::Put { kv, .. } => &kv.key,
            Event::Delete { prev, .. } => &prev.key,
        }
    }

    /// The value before the change, if any.
    pub fn prev(&self) -> Option<&KeyValue> {
        match self {
            Event::Put { prev, .. } => prev.as_ref(),
            Event::Delete { prev, .. } => Some(prev),
        }
    }
}
