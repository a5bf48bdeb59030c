package etcdlock

// KeepAliveStreams is how many LeaseKeepAlive streams a Locker keeps open.
const KeepAliveStreams = keepAliveStreams
