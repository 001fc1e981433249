const jestJupyterLab = require('@jupyterlab/testing/lib/jest-config');

// packages shipped as ES modules that jest must transform
const esModules = [
  '@codemirror',
  '@jupyter/',
  '@jupyterlab/',
  '@lumino/',
  '@marijn',
  '@microsoft',
  'color',
  'exenv-es6',
  'lib0',
  'marked',
  'nanoid',
  'vscode-ws-jsonrpc',
  'y-protocols',
  'y-websocket',
  'yjs'
].join('|');

module.exports = {
  ...jestJupyterLab(__dirname),
  automock: false,
  reporters: ['default'],
  testRegex: 'src/.*/.*.spec.ts[x]?$',
  transformIgnorePatterns: [`/node_modules/(?!${esModules}).+`]
};
