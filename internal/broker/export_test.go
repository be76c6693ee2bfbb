package broker

// What the external tests of this package (package broker_test, which may
// import the queue that sits above the broker) read of its internals.
type ServerInfo = serverInfo

const ServerInfoFile = serverInfoFile
